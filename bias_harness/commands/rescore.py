"""``bias-harness rescore {stop,stereoset} [--json]``: our metrics recomputed from the outputs the papers' authors recorded.

stop: the 10 models of ``STOP-full-labelled.json``; stereoset: the 11 released prediction files of the StereoSet paper
(the logic lives in ``plugins/stereoset_rescore.py``; this command only prints).
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


def stop_table(parser: str = "strict", ci: bool = True) -> list[dict]:
    from bias_harness.plugins.data import load_local
    from bias_harness.plugins.stop_metrics import rescore_recorded

    rows = load_local("stop", "recorded")["test"].to_list()
    return rescore_recorded(rows, parser=parser, ci=ci)


def _pct(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:5.1f}"


def _no_nan(value):
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def run(args: argparse.Namespace) -> int:
    if args.work == "stereoset":
        from bias_harness.plugins.stereoset_rescore import format_table, stereoset_table

        table = stereoset_table(ci=not args.no_ci)
        if args.json:
            json.dump(_no_nan(table), sys.stdout, indent=2)
            print()
        else:
            print(format_table(table))
        return 0
    table = stop_table(args.parser, ci=not args.no_ci)
    if args.json:
        json.dump([_no_nan(row) for row in table], sys.stdout, indent=2)
        print()
        return 0
    cols = ["P", "P_all", "P_low", "P_moderate", "P_high", "P_counter", "P_counter_all", "invalid_rate"]
    print(f"{'model':40s} " + " ".join(f"{c:>13s}" for c in cols) + f" {'P 95% CI':>14s} {'n':>4s} {'missing':>7s}")
    for row in table:
        ci = f"[{_pct(row.get('P_ci_lo'))},{_pct(row.get('P_ci_hi'))}]" if "P_ci_lo" in row else ""
        print(f"{row['model']:40s} " + " ".join(f"{_pct(row[c]):>13s}" for c in cols)
              + f" {ci:>14s} {int(row['n_progressions']):4d} {int(row['n_missing']):7d}")
    print("(percentages; P = share of progressions whose sensitivity equals the ideal for its severity)")
    return 0
