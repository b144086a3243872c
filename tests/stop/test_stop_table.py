"""STOP's results table: at most 15 headline rows per task without the breakdown switch; with
``--metadata '{"breakdown": true}'`` the breakdown metrics appear with the values ``bias-harness report`` computes
from the samples of a run without the switch."""

from __future__ import annotations

import math
import zlib
from pathlib import Path

from tests.helpers import scripted_lm

IDS = list(range(0, 450, 10))  # 45 progressions: every severity, several demographics


def _answer(ctx: str) -> str:
    """Mixed deterministic answers (yes, no, unparseable) so that every metric has a non-trivial value."""
    last = ctx.rsplit("User: ", 1)[-1].removesuffix("\n\nAssistant:").split("\n")[-1]
    return ("Yes", "No", "Yes.", "Hmm, it depends")[zlib.crc32(last.encode()) % 4]


def _run(folder: Path, **metadata) -> dict:
    import lm_eval

    import bias_harness
    from bias_harness.runs import save_run

    tm = bias_harness.task_manager(include_defaults=False, metadata=metadata or None)
    res = lm_eval.simple_evaluate(
        model=scripted_lm(_answer), tasks=["stop"], task_manager=tm, samples={"stop": IDS}, log_samples=True
    )
    save_run(res, folder)
    return res


def _names(results: dict) -> set[str]:
    return {k.split(",")[0] for k in results if "," in k and "_stderr," not in k}  # "P,none" -> "P"


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_headline_table_and_breakdown_switch(tmp_path: Path) -> None:
    from bias_harness.plugins.stop import report
    from bias_harness.plugins.stop.metrics import METRIC_KEYS
    from lm_eval.utils import make_table

    from bias_harness.report import load_run
    from bias_harness.report.verdicts import Verdicts

    plain = _run(tmp_path / "plain")
    r = plain["results"]["stop"]
    headline = _names(r)
    assert len(headline) <= 15 and {"P", "P_ci_lo", "P_ci_hi", "P_counter", "invalid_rate"} <= headline
    rows = [line for line in make_table(plain).splitlines() if line.startswith("|")][2:]  # lm-eval's printed table
    assert len(rows) == len(headline) <= 15
    breakdowns = set(METRIC_KEYS) - headline
    assert {"sensitivity_age", "P_counter_low", "P_low_ci_lo", "human_alignment"} <= breakdowns
    # the logged samples hold the active keys only
    assert all(set(s["metrics"]) == headline and not breakdowns & set(s) for s in plain["samples"]["stop"])

    full = _run(tmp_path / "full", breakdown=True)
    f = full["results"]["stop"]
    assert _names(f) == set(METRIC_KEYS)
    assert all(_same(f[f"{k},none"], r[f"{k},none"]) for k in headline)  # the switch changes no headline value
    # BBQ style: a per-subset key holds the item for documents of that subset, None elsewhere
    for s in full["samples"]["stop"]:
        assert s["sensitivity_age"] is None or s["doc"]["demographic"] == "age"
        assert (s["P_low"] is None) == (s["doc"]["severity"] != "low")
    # the report of the run without the switch computes the breakdowns from its samples: lm-eval's values
    run = load_run(tmp_path / "plain")
    assert all(_same(report.metric(run, "stop", k), f[f"{k},none"]) for k in breakdowns)
    assert sum(not math.isnan(f[f"{k},none"]) for k in breakdowns) >= 15  # real values, not all n/a
    out = tmp_path / "report"
    out.mkdir()
    full_run = load_run(tmp_path / "full")
    assert report.render(run, out, Verdicts(run)) == report.render(full_run, out, Verdicts(full_run))
