"""Contact's adapter for ``bias-harness compare`` (:mod:`bias_harness.plugins.paired`): resampling unit,
headline metrics computed with the work's own aggregation functions, McNemar outcomes."""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.paired import Adapter, Unit, replace_tag


def adapter() -> Adapter:
    from bias_harness.plugins.contact import metrics as cm

    # same_answer_rate pairs documents of two prompt sets, which the resampling of prompt sets separates: not compared
    invalid = ("invalid_rate", *(f"invalid_rate_{c}" for c in cm.CONTACTS))
    heads = (*cm.BIAS_KEYS, *cm.EFFECT_KEYS, *cm.PAIRED_KEYS, *invalid)

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        m = cm.summarize(items["invalid_rate"], iters=0)  # iters=0: no per-resample CI of its own
        return {k: m[k] for k in heads}

    def outcome(metric: str, it: Any) -> float | None:
        if it is None:
            return None
        if metric == "invalid_rate":
            return float(it[2] < 0)
        if metric.startswith("bias_pct_") and it[1] == metric[len("bias_pct_") :] and it[2] >= 0:
            return float(it[2])
        return None

    return Adapter(
        work="Contact",
        detect=lambda keys: {"bias_pct_none", "effect_positive"} <= keys,
        headline=lambda keys: [k for k in heads if k in keys],
        values=values,
        units=(
            Unit("prompt set", lambda rec: str(rec["doc"]["prompt_set_id"]), lambda it, tag: replace_tag(it, 0, tag)),
        ),
        outcome=outcome,
        sources=lambda _: {"invalid_rate"},
    )
