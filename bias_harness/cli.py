"""The ``bias-harness`` console script.

``bias-harness eval ...`` is lm-eval's own CLI (``run``, ``ls``, ``validate`` and every flag) with our task
folder always on the include path. Every other subcommand lives in ``bias_harness/commands/<name>.py``
(``add_parser(subparsers)`` + ``run(args)``) and is found automatically.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys


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
    if argv and argv[0] == "eval":
        run_lm_eval(argv[1:])
        return 0
    parser = argparse.ArgumentParser(prog="bias-harness", description="Social-bias benchmarks on lm-eval, datasets from the authors' raw files, TRL mitigation.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
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
