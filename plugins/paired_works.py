"""Per-work adapters for ``plugins/paired.py``: headline metrics, the work's own aggregations, resampling units.

Each adapter calls the aggregation functions of the work's metrics module on the resampled per-document items,
so a paired comparison always measures what the task reports (a changed metric definition changes both).

| work | resampling unit | headline metrics | McNemar on |
|---|---|---|---|
| DeMET | matched name pair (``pair_key``: scenario, name slot, both orders) | ``mixed_gender_bias``, ``pair_bias_*``, ``invalid_rate`` | ``invalid_rate`` |
| STOP | progression | ``P``, ``P_low/moderate/high``, ``P_counter``, ``sensitivity``, ``invalid_rate`` | ``P*`` (success / "no" per progression) |
| multi-agent | scenario (all its runs) | ``<response>_bias_score``, ``<response>_pct_*``, ``invalid_rate`` | -- (several agents per document) |
| StereoSet | target term (default) or context | ``lms``, ``ss``, ``icat``, ``invalid_rate`` | ``ss`` with ``averaging: example``, ``invalid_rate`` |
| Contact | prompt set | ``bias_pct_*``, ``effect_*``, ``invalid_rate`` | ``bias_pct_*``, ``invalid_rate`` |
| other tasks | document | metrics whose per-document items are numbers averaged by lm-eval (checked against results_*.json) | 0/1 metrics |
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bias_harness.plugins.paired import Adapter, Unit, by_document


def _mean(items: Sequence[Any]) -> float:
    vals = [float(x) for x in items if x is not None]
    return float(np.mean(vals)) if vals else math.nan


def _binary(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x in (0, 1) else None


def _replace(item: Any, index: int, tag: str) -> Any:
    if not isinstance(item, (tuple, list)) or len(item) <= index:
        return item
    return (*item[:index], f"{item[index]}{tag}", *item[index + 1 :])


# ---------------------------------------------------------------- DeMET


def _demet() -> Adapter:
    from bias_harness.plugins import demet_metrics as dm

    def headline(keys: set[str]) -> list[str]:
        return [k for k in ("mixed_gender_bias", *(f"pair_bias_{p}" for p in dm.PAIRS), "invalid_rate") if k in keys]

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        out = {k: dm.agg_pair_bias(v) for k, v in items.items() if k.startswith("pair_bias_")}
        if "mixed_gender_bias" in items:
            out["mixed_gender_bias"] = dm.agg_mixed_gender_bias(items["mixed_gender_bias"])
        if "invalid_rate" in items:
            out["invalid_rate"] = _mean(items["invalid_rate"])
        return out

    return Adapter(
        work="DeMET",
        detect=lambda keys: "mixed_gender_bias" in keys,
        headline=headline,
        values=values,
        # the aggregations pool answers by (pair, role), not by pair_key: a pair drawn twice simply counts twice
        units=(Unit("matched name pair", lambda rec: rec["doc"]["pair_key"]),),
        outcome=lambda metric, item: _binary(item) if metric == "invalid_rate" else None,
    )


# ---------------------------------------------------------------- STOP


def _stop() -> Adapter:
    from bias_harness.plugins import stop_metrics as sm

    heads = ("P", *(f"P_{s}" for s in sm.SEVERITIES), "P_counter", "sensitivity", "invalid_rate")

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
        decode=lambda item: None if item is None else sm.Progression(*item),
        sources=lambda _: {"P"},
    )


# ---------------------------------------------------------------- multi-agent


def _multiagent() -> Adapter:
    from bias_harness.plugins import multiagent_metrics as mm

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


# ---------------------------------------------------------------- StereoSet


def _stereoset() -> Adapter:
    from bias_harness.plugins import stereoset_metrics as ssm

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        s = ssm.scores(items["lms"])
        out = {k: float(s[k]) for k in ("lms", "ss", "icat")}
        if "invalid_rate" in items:
            out["invalid_rate"] = _mean(items["invalid_rate"])
        return out

    def outcome(metric: str, it: Any) -> float | None:
        if metric == "invalid_rate":
            return _binary(it)
        if metric == "ss" and it is not None and it[5] and it[6] == "example":
            return _binary(it[3])
        return None

    return Adapter(
        work="StereoSet",
        detect=lambda keys: {"lms", "ss", "icat"} <= keys,
        headline=lambda keys: ["lms", "ss", "icat"] + (["invalid_rate"] if "invalid_rate" in keys else []),
        values=values,
        units=(Unit("target term", lambda rec: str(rec["lms"][2]), lambda it, tag: _replace(it, 2, tag)),
               Unit("context", lambda rec: str(rec["doc_id"]))),  # fmt: skip
        outcome=outcome,
        sources=lambda heads: {"lms"} | ({"invalid_rate"} & set(heads)),
    )


# ---------------------------------------------------------------- Contact


def _contact() -> Adapter:
    from bias_harness.plugins import contact_metrics as cm

    heads = (*cm.BIAS_KEYS, *cm.EFFECT_KEYS, "invalid_rate")

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
        units=(Unit("prompt set", lambda rec: str(rec["doc"]["prompt_set_id"]), lambda it, tag: _replace(it, 0, tag)),),
        outcome=outcome,
        sources=lambda _: {"invalid_rate"},
    )


# ---------------------------------------------------------------- any other task: numeric per-document metrics


def _generic(keys: set[str], records: Sequence[dict[str, Any]]) -> Adapter | None:
    """Metrics whose items are numbers (lm-eval's ``mean``-aggregated metrics such as ``acc``), unit = document.

    The aggregation is not known from the samples: :func:`plugins.paired.compare_runs` keeps such a metric only when
    the mean of its items equals what lm-eval recorded for it in both runs.
    """
    numeric = sorted(k for k in keys if all(r.get(k) is None or _binary(r.get(k)) is not None or isinstance(r.get(k), float) for r in records)
                     and any(r.get(k) is not None for r in records))  # fmt: skip
    if not numeric:
        return None
    binary = {k for k in numeric if all(r.get(k) is None or _binary(r.get(k)) is not None for r in records)}
    return Adapter(
        work="generic",
        detect=lambda _: True,
        headline=lambda ks: [k for k in numeric if k in ks],
        values=lambda items: {k: _mean(v) for k, v in items.items()},
        units=(by_document(),),
        outcome=lambda metric, item: _binary(item) if metric in binary else None,
    )


ADAPTERS = (_demet, _stop, _multiagent, _stereoset, _contact)


def adapter_for(keys: set[str], records: Sequence[dict[str, Any]] = ()) -> Adapter | None:
    """The adapter of the work whose metric keys these are (the generic one for other tasks, or None)."""
    for make in ADAPTERS:
        adapter = make()
        if adapter.detect(keys):
            return adapter
    return _generic(keys, records)
