"""``bias-harness rescore {stop,stereoset} [--json]``: our metrics recomputed from the outputs the papers' authors recorded.

stop: the 10 models of ``STOP-full-labelled.json``; stereoset: the 11 released prediction files of the StereoSet paper
(the logic lives in ``plugins/stop/rescore.py`` and ``plugins/stereoset/rescore.py``; this command only prints).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

WORKS = ("stop", "stereoset")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rescore", help="recompute a benchmark's metrics from the authors' recorded model outputs")
    p.add_argument("work", choices=WORKS, help="which benchmark (stop: the 10 models of STOP-full-labelled.json; "
                   "stereoset: the 11 prediction files released with StereoSet)")
    p.add_argument("--json", action="store_true", help="print JSON (one object per model) instead of a table")
    p.add_argument("--parser", choices=("strict", "upstream"), default="strict",
                   help="STOP only: counterfactual answer parser (strict: ours; upstream: the authors' substring rule)")
    p.add_argument("--no-ci", action="store_true", help="skip the bootstrap confidence intervals")
    p.set_defaults(func=run)


def _no_nan(value):
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def run(args: argparse.Namespace) -> int:
    if args.work == "stereoset":
        from bias_harness.plugins.stereoset.rescore import format_table, stereoset_table

        table = stereoset_table(ci=not args.no_ci)
        if args.json:
            json.dump(_no_nan(table), sys.stdout, indent=2)
            print()
        else:
            print(format_table(table))
        return 0
    from bias_harness.plugins.stop.rescore import format_table, stop_table

    table = stop_table(args.parser, ci=not args.no_ci)
    if args.json:
        json.dump([_no_nan(row) for row in table], sys.stdout, indent=2)
        print()
        return 0
    print(format_table(table))
    return 0
