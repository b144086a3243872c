"""STOP rescored from the authors' recorded outputs: the 10 models of ``STOP-full-labelled.json`` through our metrics.

Used by ``bias-harness rescore stop`` (which only prints) and by the STOP report section (published models next to
ours).
"""

from __future__ import annotations

import math

COLUMNS = ["P", "P_all", "P_low", "P_moderate", "P_high", "P_counter", "P_counter_all", "invalid_rate"]


def stop_table(parser: str = "strict", ci: bool = True) -> list[dict]:
    """One row per recorded model: P, P per severity, P_counter, invalid rate (and bootstrap CIs with ``ci``)."""
    from bias_harness.plugins.data import load_local
    from bias_harness.plugins.stop.metrics import rescore_recorded

    rows = load_local("stop", "recorded")["test"].to_list()
    return rescore_recorded(rows, parser=parser, ci=ci)


def _pct(v: float | None) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:5.1f}"


def format_table(table: list[dict]) -> str:
    """The plain-text table ``bias-harness rescore stop`` prints (percentages)."""
    lines = [
        f"{'model':40s} " + " ".join(f"{c:>13s}" for c in COLUMNS) + f" {'P 95% CI':>14s} {'n':>4s} {'missing':>7s}"
    ]
    for row in table:
        ci = f"[{_pct(row.get('P_ci_lo'))},{_pct(row.get('P_ci_hi'))}]" if "P_ci_lo" in row else ""
        lines.append(
            f"{row['model']:40s} "
            + " ".join(f"{_pct(row[c]):>13s}" for c in COLUMNS)
            + f" {ci:>14s} {int(row['n_progressions']):4d} {int(row['n_missing']):7d}"
        )
    lines.append("(percentages; P = share of progressions whose sensitivity equals the ideal for its severity)")
    return "\n".join(lines)


def rescore(args) -> list[dict]:
    """``bias-harness rescore stop``: the table for the command's arguments (``--parser``, ``--no-ci``)."""
    return stop_table(args.parser, ci=not args.no_ci)
