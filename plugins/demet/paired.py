"""DeMET's adapter for ``bias-harness compare`` (:mod:`bias_harness.plugins.paired`): resampling unit,
headline metrics computed with the work's own aggregation functions, McNemar outcomes."""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.paired import Adapter, Unit, binary, mean


def adapter() -> Adapter:
    from bias_harness.plugins.demet import metrics as dm

    def headline(keys: set[str]) -> list[str]:
        return [k for k in ("mixed_gender_bias", *(f"pair_bias_{p}" for p in dm.PAIRS), "invalid_rate") if k in keys]

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        out = {k: dm.agg_pair_bias(v) for k, v in items.items() if k.startswith("pair_bias_")}
        if "mixed_gender_bias" in items:
            out["mixed_gender_bias"] = dm.agg_mixed_gender_bias(items["mixed_gender_bias"])
        if "invalid_rate" in items:
            out["invalid_rate"] = mean(items["invalid_rate"])
        return out

    return Adapter(
        work="DeMET",
        detect=lambda keys: "mixed_gender_bias" in keys,
        headline=headline,
        values=values,
        # the aggregations pool answers by (pair, role), not by pair_key: a pair drawn twice simply counts twice
        units=(Unit("matched name pair", lambda rec: rec["doc"]["pair_key"]),),
        outcome=lambda metric, item: binary(item) if metric == "invalid_rate" else None,
    )
