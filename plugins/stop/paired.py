"""STOP's adapter for ``bias-harness compare`` (:mod:`bias_harness.plugins.paired`): resampling unit,
headline metrics computed with the work's own aggregation functions, McNemar outcomes."""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.paired import Adapter, Unit


def adapter() -> Adapter:
    from bias_harness.plugins.stop import metrics as sm

    heads = ("P", *(f"P_{s}" for s in sm.SEVERITIES), "P_counter", "sensitivity", "invalid_rate", "invalid_rate_cf")

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        m = sm.compute_metrics(items["P"], ci=False)
        return {k: m[k] for k in heads}

    def outcome(metric: str, it: Any) -> float | None:
        if it is None or it.dropped:
            return None
        if metric == "P_counter":
            return None if it.counterfactual == sm.INVALID else float(it.counterfactual == sm.NO)
        if metric == "P" or (metric.startswith("P_") and metric[2:] == it.severity):
            ok = sm.is_success(it)  # the success rule of the metrics module itself
            return None if ok is None else float(ok)
        return None

    return Adapter(
        work="STOP",
        detect=lambda keys: {"P", "P_counter"} <= keys,
        headline=lambda keys: [k for k in heads if k in keys],
        values=values,
        units=(Unit("progression", lambda rec: str(rec["doc"].get("progression_id", rec["doc_id"]))),),
        outcome=outcome,
        decode=lambda item: None if item is None else sm.decode(item),
        sources=lambda _: {"P"},
    )
