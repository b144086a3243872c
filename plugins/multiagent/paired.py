"""Multi-agent's adapter for ``bias-harness compare`` (:mod:`bias_harness.plugins.paired`): resampling unit,
headline metrics computed with the work's own aggregation functions, McNemar outcomes."""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.paired import Adapter, Unit


def adapter() -> Adapter:
    from bias_harness.plugins.multiagent import metrics as mm

    stats = (
        "bias_score",
        "bias_score_nondegenerate",
        "degenerate_rate",
        "pct_stereotypical",
        "pct_anti_stereotypical",
        "pct_neutral",
    )

    def source(
        metric: str,
    ) -> str:  # a response kind's statistics from its bias-score items (logged also without the breakdowns)
        return next((f"{r}_bias_score" for r in mm.RESPONSES if metric.startswith(f"{r}_")), metric)

    def headline(keys: set[str]) -> list[str]:
        return [f"{r}_{s}" for r in mm.RESPONSES for s in stats if f"{r}_bias_score" in keys] + (
            ["invalid_rate"] if "invalid_rate" in keys else []
        )

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        return {m: mm.aggregate(m, items[source(m)]) for m in headline(set(items))}

    return Adapter(
        work="multi-agent",
        detect=lambda keys: any(k.endswith("_bias_score") for k in keys) and "invalid_rate" in keys,
        headline=headline,
        values=values,
        units=(Unit("scenario", lambda rec: str(rec["doc"]["id"])),),  # the aggregations pool by run, not by scenario
        sources=lambda metrics: {source(m) for m in metrics},
    )
