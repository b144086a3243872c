"""``bias-harness rescore WORK [--json]``: our metrics recomputed from the outputs the papers' authors recorded.

Every work with a ``plugins/<work>/rescore.py`` (``rescore(args) -> rows``, ``format_table(rows)``) is a
choice: stop (the 10 models of ``STOP-full-labelled.json``), stereoset (the 11 released prediction files of the
StereoSet paper). The logic lives there; this command only prints.
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rescore", help="recompute a benchmark's metrics from the authors' recorded model outputs")
    from bias_harness import works

    p.add_argument(
        "work",
        choices=works.having("rescore"),
        help="which benchmark (stop: the 10 models of "
        "STOP-full-labelled.json; stereoset: the 11 prediction files released with StereoSet)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (one object per model) instead of a table")
    p.add_argument(
        "--parser",
        choices=("strict", "upstream"),
        default="strict",
        help="STOP only: counterfactual answer parser (strict: ours; upstream: the authors' substring rule)",
    )
    p.add_argument("--no-ci", action="store_true", help="skip the bootstrap confidence intervals")
    p.set_defaults(func=run)


def _no_nan(value):
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def run(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(f"bias_harness.plugins.{args.work}.rescore")
    table = module.rescore(args)
    if args.json:
        json.dump([_no_nan(row) for row in table], sys.stdout, indent=2)
        print()
    else:
        print(module.format_table(table))
    return 0
