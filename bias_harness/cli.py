"""The ``bias-harness`` console script.

``bias-harness eval ...`` is lm-eval's CLI (``run``, ``ls``, ``validate`` and every flag) with our task folder
always on the include path, its options checked against :data:`EVAL_OPTIONS` and the tasks' ``--metadata`` schemas
(:mod:`bias_harness.plugins.metadata`) before the model is loaded, and its results and samples written with secrets
masked, to temporary names, checked and renamed into place (:func:`_lm_eval_guards`). Every other subcommand lives
in ``bias_harness/commands/<name>.py`` (``add_parser(subparsers)`` + ``run(args)``) and is found automatically; its
options are declared with their schema (:class:`bias_harness.options.Opt` as argparse ``type=``).

Every error goes through one handler (:func:`bias_harness.errors.run_main`): one line ``bias-harness: error: ...``
naming the option, file, record or pack line, exit code 2 (1 for an internal error); ``--debug`` (anywhere on the
command line) or ``BIAS_HARNESS_DEBUG=1`` shows the traceback instead.

Secrets (:mod:`bias_harness.redact`): the values of the command line's secret arguments are remembered at start-up
and masked, with every other key-shaped value, URL password and token, in all the process prints (stdout and
stderr, logs and tracebacks included) and in the results and samples files of ``bias-harness eval``.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import logging
import pkgutil
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, NoReturn

from bias_harness.errors import (  # noqa: F401  (USER_ERROR_TYPES, is_user_error: their former home)
    USER_ERROR_TYPES,
    BadInput,
    WriteFailed,
    check_names,
    check_writable,
    is_user_error,
    run_main,
)
from bias_harness.options import Opt
from bias_harness.redact import redact

# lm-eval's options that bias-harness checks where lm-eval declares them (argparse types, before the model loads)
EVAL_OPTIONS: dict[str, Opt] = {
    "limit": Opt("float", "the first N documents of each task (N >= 1) or a share of them (0 < N < 1)", above=0),
    "num_fewshot": Opt("int", "few-shot examples per prompt", min=0),
    "max_batch_size": Opt("int", "largest batch size of --batch_size auto", min=1),
}
LIMIT_BATCH = ("auto",)  # --batch_size: a number >= 1, auto or auto:N


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


def _one_line_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    where = parser.prog.removeprefix("bias-harness").strip()
    hint = f" (see `{parser.prog} --help`)"
    parser.exit(2, f"bias-harness: error: {where + ': ' if where else ''}{message}{hint}\n")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (sub-command parsers inherit the class)."""

    def error(self, message: str) -> NoReturn:
        _one_line_error(self, message)


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every sub-command parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from parsers(sub)


def lm_eval_cli() -> Any:
    """lm-eval's ``HarnessCLI`` with one-line parse errors (``bias-harness eval: ...``) and :data:`EVAL_OPTIONS`
    as the types of those options."""
    from lm_eval._cli import HarnessCLI

    cli = HarnessCLI()
    for parser in parsers(cli._parser):
        parser.prog = parser.prog.replace("lm-eval", "bias-harness eval", 1)
        parser.error = lambda message, parser=parser: _one_line_error(parser, message)  # type: ignore[method-assign]
        for action in parser._actions:
            if action.dest in EVAL_OPTIONS:
                action.type = Opt(**{**vars(EVAL_OPTIONS[action.dest]), "flag": action.option_strings[-1]})
    return cli


def run_lm_eval(argv: list[str]) -> None:
    """lm-eval's CLI with ``tasks_dir()`` prepended to ``--include_path`` (which then may be a list), and with the
    checks of :func:`_lm_eval_guards`."""
    from lm_eval.utils import setup_logging

    import bias_harness.plugins  # noqa: F401  (register our request type, model types, filters)
    from bias_harness import tasks_dir

    setup_logging()
    saved = sys.argv
    sys.argv = ["bias-harness eval", *argv]
    try:
        cli = lm_eval_cli()
        args = cli.parse_args()
    except ValueError as err:  # lm-eval's argparse actions raise it for e.g. --metadata '{bad'
        raise _argument_error(argv, err) from None
    finally:
        sys.argv = saved
    if hasattr(args, "include_path"):  # run / ls / validate
        user = args.include_path
        args.include_path = [tasks_dir()] + ([user] if user else [])
    with _lm_eval_guards(args) as saved_files:
        cli.execute(args)
        saved_files.commit()


def _argument_error(argv: list[str], err: ValueError) -> BadInput:
    text = " ".join(str(err).split())
    flag = next(
        (argv[i - 1] for i in range(1, len(argv)) if argv[i] and argv[i] in text and argv[i - 1].startswith("--")), None
    )
    return BadInput(f"{flag}: {text}" if flag else text)


class _SavedFiles:
    """lm-eval's results and samples of one run: written to a temporary folder beside ``--output_path``, checked,
    then moved into place together (:meth:`commit`); lm-eval only logs a warning when a write fails, so what it
    saved is checked, and a file it could not write is an error naming it."""

    def __init__(self) -> None:
        self.staging: Path | None = None
        self.final: Path | None = None  # the folder the staged files go to (--output_path's parent)
        self.failures: list[str] = []
        self.expected: list[str] = []  # names (relative to staging) lm-eval should have written

    def stage(self, tracker: Any) -> None:
        """Point ``tracker`` at the temporary folder (once per run)."""
        import tempfile

        if self.staging is None:
            output = Path(tracker.output_path)
            self.final = output.parent
            self.final.mkdir(parents=True, exist_ok=True)
            self.staging = Path(tempfile.mkdtemp(dir=self.final, prefix=f".{output.name[:60]}.saving-"))
            tracker.output_path = str(self.staging / output.name)

    def result_dir(self, tracker: Any) -> Path:
        path = Path(tracker.output_path)
        return (
            path.parent if path.suffix == ".json" else path / str(tracker.general_config_tracker.model_name_sanitized)
        )

    def commit(self) -> None:
        from bias_harness.atomic import commit_folder

        if self.staging is None:
            return
        missing = [name for name in self.expected if not (self.staging / name).is_file()]
        try:
            if missing:
                raise WriteFailed(f"{self.final / missing[0]}: could not be written (lm-eval wrote nothing)")
            commit_folder(self.staging, self.final)
        except WriteFailed as err:
            if not self.failures:
                raise
            name = str(err).split(": could not be written", 1)[0]
            raise WriteFailed(
                f"{name}: could not be written ({_reason(self.failures[-1])}); nothing was saved under that name"
            ) from None

    def discard(self) -> None:
        import shutil

        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)


def _reason(logged: str) -> str:
    """lm-eval's logged ``OSError(28, 'No space left on device')`` in words (:data:`bias_harness.errors.OS_REASONS`)."""
    import re

    from bias_harness.errors import OS_REASONS

    m = re.search(r"Error\((\d+),", logged)
    return OS_REASONS.get(int(m.group(1)), logged) if m else logged


class _FinalPaths(logging.Filter):
    """lm-eval's log lines name the final folder, not the temporary one it writes to."""

    def __init__(self, saved: _SavedFiles) -> None:
        super().__init__()
        self.saved = saved

    def filter(self, record: logging.LogRecord) -> bool:
        staging, final = self.saved.staging, self.saved.final
        if staging is not None and final is not None and isinstance(record.msg, str) and str(staging) in record.msg:
            record.msg = record.msg.replace(str(staging), str(final))
        return True


class _SaveFailures(logging.Handler):
    """lm-eval's own record of a failed save (it logs ``repr(err)`` at INFO after its warning)."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "Error(" in text or "Exception(" in text:
            self.into.append(text)


@contextmanager
def _lm_eval_guards(args: argparse.Namespace) -> Iterator[_SavedFiles]:
    """Checks and writes around lm-eval's ``run`` (lm-eval's methods are patched for this call only):

    * ``EvaluatorConfig.from_cli`` (the run's settings, before the model is loaded): a setting lm-eval refuses or
      an unknown ``--model`` type is a one-line :class:`BadInput`; ``--output_path`` must be writable under names
      the file system accepts (:func:`_check_run_outputs`), an existing ``--use_cache`` database readable,
      ``--batch_size`` and ``--samples`` well-formed, ``--metadata`` keys known to the run's tasks with values of
      their declared types (:func:`bias_harness.plugins.metadata.check`); the device recorded is the one used;
    * ``ConfigurableTask.doc_iterator``: a ``--samples`` document id the task lacks is a one-line error;
    * ``EvaluationTracker.save_results_aggregated`` / ``save_results_samples``: secrets masked (lm-eval records
      ``--model_args`` and ``--metadata`` in every results file and the generation settings in every sample), and
      every file written to a temporary folder, then checked and moved into place (:class:`_SavedFiles`)."""
    from lm_eval.api.registry import get_model
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.config.evaluate_config import EvaluatorConfig
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    from_cli = EvaluatorConfig.__dict__["from_cli"]
    save, save_samples = EvaluationTracker.save_results_aggregated, EvaluationTracker.save_results_samples
    doc_iterator = ConfigurableTask.doc_iterator
    saved = _SavedFiles()
    log = logging.getLogger("lm_eval.loggers.evaluation_tracker")
    failures, final_paths = _SaveFailures(saved.failures), _FinalPaths(saved)

    def checked_from_cli(cls: type[EvaluatorConfig], namespace: argparse.Namespace) -> EvaluatorConfig:
        _check_batch_size(getattr(namespace, "batch_size", None))
        try:
            cfg = from_cli.__func__(cls, namespace)
        except (ValueError, TypeError) as err:
            raise BadInput(" ".join(str(err).split())) from None
        _check_run_outputs(cfg.output_path, cfg.use_cache, cfg.model_args)
        _check_samples(cfg.samples)
        tasks = cfg.tasks.split(",") if isinstance(cfg.tasks, str) else list(cfg.tasks or [])
        from bias_harness.plugins import metadata

        metadata.check(getattr(namespace, "metadata", None), [t.strip() for t in tasks if str(t).strip()])
        cfg.device = _device_used(cfg.device)
        if isinstance(cfg.model, str):  # an unknown model type, before lm-eval indexes its tasks
            try:
                get_model(cfg.model)
            except ValueError as err:
                raise BadInput(f"--model: {err}") from None
        return cfg

    def checked_doc_iterator(self: ConfigurableTask, *, samples: list[int] | None = None, **kwargs: Any) -> Any:
        if samples:
            n = len(self.eval_docs)
            bad = [i for i in samples if not isinstance(i, int) or not 0 <= i < n]
            if bad:
                raise BadInput(
                    f"--samples: task {self.config.task}: document id {bad[0]!r} is not one of its {n} documents "
                    f"(0 to {n - 1})"
                )
        return doc_iterator(self, samples=samples, **kwargs)

    def save_checked(self: EvaluationTracker, results: dict, samples: dict | None = None) -> None:
        if not self.output_path:
            return save(self, results=redact(results), samples=samples)
        saved.stage(self)
        save(self, results=redact(results), samples=samples)
        folder = saved.result_dir(self)
        date = getattr(self, "date_id", None) or "<date>"
        name = Path(self.output_path).stem + f"_{date}.json" if Path(self.output_path).suffix == ".json" else None
        results_file = folder / (name or f"results_{date}.json")
        saved.expected.append(str(results_file.relative_to(saved.staging)))

    def save_samples_checked(self: EvaluationTracker, task_name: str, samples: list) -> None:
        if self.output_path and saved.staging is not None:
            date = getattr(self, "date_id", None) or "<date>"
            path = saved.result_dir(self) / f"samples_{task_name}_{date}.jsonl"
            saved.expected.append(str(path.relative_to(saved.staging)))
        return save_samples(self, task_name=task_name, samples=[redact(s) for s in samples])

    EvaluatorConfig.from_cli = classmethod(checked_from_cli)
    ConfigurableTask.doc_iterator = checked_doc_iterator
    EvaluationTracker.save_results_aggregated = save_checked
    EvaluationTracker.save_results_samples = save_samples_checked
    log.addHandler(failures)
    log.addFilter(final_paths)
    try:
        yield saved
    finally:
        EvaluatorConfig.from_cli = from_cli
        ConfigurableTask.doc_iterator = doc_iterator
        EvaluationTracker.save_results_aggregated = save
        EvaluationTracker.save_results_samples = save_samples
        log.removeHandler(failures)
        log.removeFilter(final_paths)
        saved.discard()


def _check_batch_size(value: Any) -> None:
    text = str(value).strip() if value is not None else ""
    if not text or text == "auto":
        return
    number = text.removeprefix("auto:")
    if not number.isdigit() or int(number) < 1:
        raise BadInput(f"--batch_size: expected a number >= 1, auto or auto:N (N >= 1), not {value!r}")


def _check_samples(samples: Any) -> None:
    """``--samples``: a JSON object (or JSON file) of task -> list of document ids >= 0."""
    if samples is None:
        return
    if not isinstance(samples, dict):
        raise BadInput(f"--samples: expected a JSON object of task -> document ids, or a JSON file, not {samples!r}")
    for task, ids in samples.items():
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
            raise BadInput(f"--samples: task {task!r}: expected a list of document ids (integers >= 0), not {ids!r}")


def _device_used(device: str | None) -> str | None:
    """The device lm-eval's ``hf`` model really uses: it falls back to the CPU when CUDA is asked for and absent
    (lm-eval would still record ``cuda:0``, its default, in the results and the report would say so)."""
    if not device or not str(device).startswith("cuda"):
        return device
    import torch

    return device if torch.cuda.is_available() else "cpu"


def _check_run_outputs(output_path: str | None, use_cache: str | None, model_args: Any = None) -> None:
    """Fail before the model is loaded when lm-eval could not write its results (a folder it cannot write, a name
    longer than the file system allows, including the model folder and file names lm-eval adds) or read its
    response cache."""
    if output_path:
        from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker
        from lm_eval.utils import sanitize_model_name

        output = Path(output_path)
        if output.suffix == ".json":
            check_writable(output.parent, "--output_path", f"{output.stem}_2000-01-01T00-00-00.000000.json")
        else:
            model = sanitize_model_name(GeneralConfigTracker._get_model_name(model_args) or "model")
            check_writable(output, "--output_path", model, "results_2000-01-01T00-00-00.000000.json")
    if use_cache:
        cache = Path(use_cache)
        check_writable(cache.parent, "--use_cache", f"{cache.name}_rank0.db")
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
    """The console script: every command through the one error handler (:func:`bias_harness.errors.run_main`)."""
    return run_main(_run, argv)


def build_parser() -> argparse.ArgumentParser:
    """The ``bias-harness`` parser with every subcommand's (``eval`` is lm-eval's: :func:`lm_eval_cli`)."""
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
    return parser


def _run(argv: list[str]) -> int:
    if argv and argv[0] == "eval":
        run_lm_eval(argv[1:])
        return 0
    parser = build_parser()
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
