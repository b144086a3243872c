"""Multi-agent's adapter for ``bias-harness compare`` (:mod:`bias_harness.plugins.paired`): resampling unit,
headline metrics computed with the work's own aggregation functions, McNemar outcomes."""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.paired import Adapter, Unit


def adapter() -> Adapter:
    from bias_harness.plugins.multiagent import metrics as mm

    stats = ("bias_score", "pct_stereotypical", "pct_anti_stereotypical", "pct_neutral")

    def headline(keys: set[str]) -> list[str]:
        return [f"{r}_{s}" for r in mm.RESPONSES for s in stats if f"{r}_{s}" in keys] + (["invalid_rate"] if "invalid_rate" in keys else [])

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        out = {k: getattr(mm, f"agg_{k}")(v) for k, v in items.items() if k != "invalid_rate"}
        if "invalid_rate" in items:
            out["invalid_rate"] = mm.agg_invalid_rate(items["invalid_rate"])
        return out

    return Adapter(
        work="multi-agent",
        detect=lambda keys: any(k.endswith("_bias_score") for k in keys) and "invalid_rate" in keys,
        headline=headline,
        values=values,
        units=(Unit("scenario", lambda rec: str(rec["doc"]["id"])),),  # the aggregations pool by run, not by scenario
    )
