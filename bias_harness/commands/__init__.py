"""Subcommands of ``bias-harness`` (one module each: ``add_parser(subparsers)``, then ``args.func(args)``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_dry_run(parser: argparse.ArgumentParser, help: str) -> None:
    """``--dry-run [DIR]`` of the commands that upload to the Hub: DIR (default ./hub_upload) gets the folder that
    would be uploaded, and nothing is uploaded."""
    from bias_harness.options import Opt

    parser.add_argument(
        "--dry-run", type=Opt("out_dir"), nargs="?", const=Path("hub_upload"), default=None, metavar="DIR", help=help
    )
