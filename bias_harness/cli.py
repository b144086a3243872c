"""The ``bias-harness`` console script.

``bias-harness eval ...`` is lm-eval's own CLI (``run``, ``ls``, ``validate`` and every flag) with our task
folder always on the include path. Every other subcommand lives in ``bias_harness/commands/<name>.py``
(``add_parser(subparsers)`` + ``run(args)``) and is found automatically.

Errors a user can make (bias_harness.errors, the project's own error types in ``USER_ERROR_TYPES``, argparse
errors, lm-eval's unknown task, model type or refused setting) print one line ``bias-harness: error: ...`` and exit
with 2; ``--debug`` (anywhere on the command line) or ``BIAS_HARNESS_DEBUG=1`` shows the traceback instead.

Secrets (:mod:`bias_harness.redact`): the values of the command line's secret arguments are remembered at start-up
and masked, with every other token or key, in all the process prints (stdout and stderr, logs and tracebacks
included) and in the results files of ``bias-harness eval``.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import logging
import os
import pkgutil
import sys
import traceback
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import NoReturn

from bias_harness.errors import BadInput, UserError, check_writable
from bias_harness.redact import redact, redacted_std_streams, remember, secrets_in_argv

# The project's error types that mean "bad input", by qualified name: checking names keeps the heavy modules
# that define them (lm-eval, datasets) out of commands that never raise them.
USER_ERROR_TYPES = frozenset(
    {
        "bias_harness.datasets_src.raw.RawSourceError",
        "bias_harness.datasets_src.raw.RawDataError",
        "bias_harness.datasets_src.generate_common.GenerationSetupError",
        "bias_harness.plugins.multiturn.dialogues.DialogueError",
        "bias_harness.plugins.paired.RunMismatch",
        "bias_harness.mitigation.recipe.RecipeError",
    }
)
# lm-eval's own messages for input errors (it raises plain ValueError for them)
LM_EVAL_USER_MESSAGES = ("Tasks not found:",)


def is_user_error(err: BaseException) -> bool:
    if isinstance(err, UserError):
        return True
    if any(f"{cls.__module__}.{cls.__qualname__}" in USER_ERROR_TYPES for cls in type(err).__mro__):
        return True
    return isinstance(err, ValueError) and str(err).startswith(LM_EVAL_USER_MESSAGES)


def json_object(value: str) -> dict:
    """argparse type of JSON-object options such as ``--metadata``: a one-line message naming the problem."""
    import json

    try:
        obj = json.loads(value)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON: {value!r} ({err.msg} at character {err.pos})") from None
    if not isinstance(obj, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"key\": 1}}', got {value!r}")
    return obj


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("BIAS_HARNESS_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (sub-command parsers inherit the class)."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("bias-harness").strip()
        hint = f" (see `{self.prog} --help`)"
        self.exit(2, f"bias-harness: error: {where + ': ' if where else ''}{message}{hint}\n")


def run_lm_eval(argv: list[str]) -> None:
    """lm-eval's CLI with ``tasks_dir()`` prepended to ``--include_path`` (which then may be a list), and with the
    checks of :func:`_lm_eval_guards`."""
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    import bias_harness.plugins  # noqa: F401  (register our request type, model types, filters)
    from bias_harness import tasks_dir

    setup_logging()
    saved = sys.argv
    sys.argv = ["bias-harness eval", *argv]
    try:
        cli = HarnessCLI()
        args = cli.parse_args()
    except ValueError as err:  # lm-eval's argparse actions raise it for e.g. --metadata '{bad'
        raise _argument_error(argv, err) from None
    finally:
        sys.argv = saved
    if hasattr(args, "include_path"):  # run / ls / validate
        user = args.include_path
        args.include_path = [tasks_dir()] + ([user] if user else [])
    with _lm_eval_guards():
        cli.execute(args)


def _argument_error(argv: list[str], err: ValueError) -> BadInput:
    text = " ".join(str(err).split())
    flag = next(
        (argv[i - 1] for i in range(1, len(argv)) if argv[i] and argv[i] in text and argv[i - 1].startswith("--")), None
    )
    return BadInput(f"{flag}: {text}" if flag else text)


@contextmanager
def _lm_eval_guards() -> Iterator[None]:
    """Two checks and a mask around lm-eval's ``run`` (both lm-eval methods are patched for this call only):

    * ``EvaluatorConfig.from_cli`` (the run's settings, before the model is loaded): a setting lm-eval refuses
      (``--log_samples`` without ``--output_path``, bad ``--seed``...) or an unknown ``--model`` type is a one-line
      :class:`BadInput`, and ``--output_path`` must be writable and an existing ``--use_cache`` database readable
      (lm-eval itself would run the whole evaluation, then only warn that it could not save its results);
    * ``EvaluationTracker.save_results_aggregated`` writes the results with secrets masked: lm-eval records
      ``--model_args`` (and ``--metadata``, merged with them) in every results file, a ``token=...`` included."""
    from lm_eval.api.registry import get_model
    from lm_eval.config.evaluate_config import EvaluatorConfig
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    from_cli, save = EvaluatorConfig.__dict__["from_cli"], EvaluationTracker.save_results_aggregated

    def checked_from_cli(cls: type[EvaluatorConfig], namespace: argparse.Namespace) -> EvaluatorConfig:
        try:
            cfg = from_cli.__func__(cls, namespace)
        except (ValueError, TypeError) as err:
            raise BadInput(" ".join(str(err).split())) from None
        _check_run_outputs(cfg.output_path, cfg.use_cache)
        if isinstance(cfg.model, str):  # an unknown model type, before lm-eval indexes its tasks
            try:
                get_model(cfg.model)
            except ValueError as err:
                raise BadInput(f"--model: {err}") from None
        return cfg

    def save_redacted(self: EvaluationTracker, results: dict, samples: dict | None = None) -> None:
        return save(self, results=redact(results), samples=samples)

    EvaluatorConfig.from_cli = classmethod(checked_from_cli)
    EvaluationTracker.save_results_aggregated = save_redacted
    try:
        yield
    finally:
        EvaluatorConfig.from_cli = from_cli
        EvaluationTracker.save_results_aggregated = save


def _check_run_outputs(output_path: str | None, use_cache: str | None) -> None:
    """Fail before the model is loaded when lm-eval could not write its results or read its response cache."""
    if output_path:
        output = Path(output_path)
        check_writable(output.parent if output.suffix == ".json" else output, "--output_path")
    if use_cache:
        cache = Path(use_cache)
        check_writable(cache.parent, "--use_cache")
        for db in sorted(cache.parent.glob(f"{glob.escape(cache.name)}_rank*.db")):
            _check_sqlite(db)


def _check_sqlite(path: Path) -> None:
    import sqlite3

    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as err:
        raise BadInput(
            f"--use_cache: {path} is not a readable SQLite database ({err}); delete it (its answers are "
            "lost) or give another --use_cache path"
        ) from None


def _commands() -> dict[str, object]:
    import bias_harness.commands as pkg

    return {
        m.name: importlib.import_module(f"{pkg.__name__}.{m.name}")
        for m in pkgutil.iter_modules(pkg.__path__)
        if not m.name.startswith("_")
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_requested(argv)
    argv = [a for a in argv if a != "--debug"]
    remember(*secrets_in_argv(argv))  # masked in everything this process prints or writes
    with redacted_std_streams():
        try:
            return _run(argv)
        except Exception as err:
            if debug or not is_user_error(err):
                traceback.print_exc()  # here, not by the interpreter: through the redacting stderr
                return 1
            message = " ".join(str(err).split()) or type(err).__name__
            print(f"bias-harness: error: {message}", file=sys.stderr)
            return 2


def _run(argv: list[str]) -> int:
    if argv and argv[0] == "eval":
        run_lm_eval(argv[1:])
        return 0
    parser = _Parser(
        prog="bias-harness",
        description="Social-bias benchmarks on lm-eval, datasets from the authors' raw files, TRL mitigation.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of an error (also BIAS_HARNESS_DEBUG=1)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "eval",
        help="lm-eval's CLI (run/ls/validate, every lm-eval flag) with our tasks on the include path",
        add_help=False,
    )
    for _name, module in sorted(_commands().items()):
        module.add_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.command:
        parser.print_help()
        return 1
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
