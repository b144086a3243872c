"""The ``bias-harness`` console script.

``bias-harness eval ...`` is lm-eval's own CLI (``run``, ``ls``, ``validate`` and every flag) with our task
folder always on the include path. Every other subcommand lives in ``bias_harness/commands/<name>.py``
(``add_parser(subparsers)`` + ``run(args)``) and is found automatically.

Errors a user can make (bias_harness.errors, the project's own error types in ``USER_ERROR_TYPES``, argparse
errors, lm-eval's unknown task) print one line ``bias-harness: error: ...`` and exit with 2; ``--debug`` (anywhere
on the command line) or ``BIAS_HARNESS_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
from typing import NoReturn

from bias_harness.errors import UserError

# The project's error types that mean "bad input", by qualified name: checking names keeps the heavy modules
# that define them (lm-eval, datasets) out of commands that never raise them.
USER_ERROR_TYPES = frozenset({
    "bias_harness.datasets_src.raw.RawSourceError",
    "bias_harness.datasets_src.raw.RawDataError",
    "bias_harness.datasets_src.generate_common.GenerationSetupError",
    "bias_harness.plugins.multiturn.dialogues.DialogueError",
    "bias_harness.plugins.paired.RunMismatch",
    "bias_harness.mitigation.recipes.RecipeError",
})
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
    """lm-eval's CLI with ``tasks_dir()`` prepended to ``--include_path`` (which then may be a list)."""
    import bias_harness.plugins  # noqa: F401  (register our request type, model types, filters)
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    from bias_harness import tasks_dir

    setup_logging()
    saved = sys.argv
    sys.argv = ["bias-harness eval", *argv]
    try:
        cli = HarnessCLI()
        args = cli.parse_args()
    finally:
        sys.argv = saved
    if hasattr(args, "include_path"):  # run / ls / validate
        user = args.include_path
        args.include_path = [tasks_dir()] + ([user] if user else [])
    cli.execute(args)


def _commands() -> dict[str, object]:
    import bias_harness.commands as pkg

    return {m.name: importlib.import_module(f"{pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_requested(argv)
    argv = [a for a in argv if a != "--debug"]
    try:
        return _run(argv)
    except Exception as err:
        if debug or not is_user_error(err):
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"bias-harness: error: {message}", file=sys.stderr)
        return 2


def _run(argv: list[str]) -> int:
    if argv and argv[0] == "eval":
        run_lm_eval(argv[1:])
        return 0
    parser = _Parser(prog="bias-harness", description="Social-bias benchmarks on lm-eval, datasets from the authors' raw files, TRL mitigation.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error (also BIAS_HARNESS_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("eval", help="lm-eval's CLI (run/ls/validate, every lm-eval flag) with our tasks on the include path", add_help=False)
    for name, module in sorted(_commands().items()):
        module.add_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.command:
        parser.print_help()
        return 1
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
