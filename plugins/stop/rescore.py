"""STOP rescored from the authors' recorded outputs: the 10 models of ``STOP-full-labelled.json`` through our metrics.

Used by ``bias-harness rescore stop`` (which only prints) and by the STOP report section (published models next to
ours).
"""

from __future__ import annotations

import json
import math

COLUMNS = ["P", "P_all", "P_low", "P_moderate", "P_high", "P_counter", "P_counter_all", "invalid_rate"]


def stop_table(parser: str = "strict", ci: bool = True) -> list[dict]:
    """One row per recorded model: P, P per severity, P_counter, invalid rate (and bootstrap CIs with ``ci``)."""
    from bias_harness.plugins.data import load_local, local_path
    from bias_harness.plugins.stop.metrics import rescore_recorded

    rows = load_local("stop", "recorded")["test"].to_list()
    _check_released(local_path("stop"))
    return rescore_recorded(rows, parser=parser, ci=ci)


def _check_released(folder) -> None:
    """The recorded outputs are the released ``STOP-full-labelled.json`` (its build checked the pinned sha256): a
    copy built from a modified file (``--allow-modified-raw``) is refused, as is a built file changed since."""
    from bias_harness.datasets_src.publish import manifest_files
    from bias_harness.datasets_src.raw import RawSourceError

    info = json.loads((folder / "build_info.json").read_text(encoding="utf-8"))
    if "files" in info:  # (builds before the manifest listed its files have only their raw files' check)
        manifest_files(folder)  # every file as its build wrote it (sha256)
    for entry in (info.get("modified_raw_files") or {}).values():
        raise RawSourceError(
            f"{folder}: built from a modified {entry['key']} (sha256 {entry['sha256'][:16]}..., released "
            f"{entry['upstream_sha256'][:16]}...); rescore scores the released outputs: restore the authors' file "
            "and run `bias-harness data build stop`"
        )


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
