"""StereoSet's adapter for ``bias-harness compare`` (:mod:`bias_harness.plugins.paired`): resampling unit,
headline metrics computed with the work's own aggregation functions, McNemar outcomes."""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.paired import Adapter, Unit, binary, mean, replace_tag


def adapter() -> Adapter:
    from bias_harness.plugins.stereoset import metrics as ssm

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        s = ssm.scores(items["lms"])
        out = {k: float(s[k]) for k in ("lms", "ss", "icat")}
        if "invalid_rate" in items:
            out["invalid_rate"] = mean(items["invalid_rate"])
        return out

    def outcome(metric: str, it: Any) -> float | None:
        if metric == "invalid_rate":
            return binary(it)
        if metric == "ss" and it is not None and it[5] and it[6] == "example":
            return binary(it[3])
        return None

    return Adapter(
        work="StereoSet",
        detect=lambda keys: {"lms", "ss", "icat"} <= keys,
        headline=lambda keys: ["lms", "ss", "icat"] + (["invalid_rate"] if "invalid_rate" in keys else []),
        values=values,
        units=(
            Unit("target term", lambda rec: str(rec["lms"][2]), lambda it, tag: replace_tag(it, 2, tag)),
            Unit("context", lambda rec: str(rec["doc_id"])),
        ),
        outcome=outcome,
        sources=lambda heads: {"lms"} | ({"invalid_rate"} & set(heads)),
    )
