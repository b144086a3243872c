"""Paired comparison of two lm-eval runs of the same task on the same documents.

A run is what lm-eval writes with ``--output_path DIR --log_samples``: ``results_*.json`` and ``samples_*.jsonl``.
Every sample record holds, under each metric key, the item the task's ``process_results`` returned for that
document, and the task's own aggregation turns a list of items into the metric. So a paired comparison needs no
metric of its own: :func:`bias_harness.report.compare.compare_runs` matches the documents of both runs, groups them by
the task's resampling unit, and on every bootstrap resample (the same units for both runs) recomputes each headline
metric with the work's own aggregation (declared by an :class:`Adapter`, each work's ``plugins/<work>/paired.py``) and
takes the difference.

Per headline metric the result has (B minus A):

* ``diff``: the metric of run B minus that of run A, on all documents;
* ``ci_lo`` / ``ci_hi``: 95% percentile interval of the differences over paired resamples of units;
* ``p_bootstrap``: two-sided paired-bootstrap p-value, the smallest alpha whose percentile interval excludes 0:
  ``min(1, 2 * min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (m + 1))`` over the ``m`` resamples where the metric is defined
  in both runs (the +1s: the usual Monte Carlo correction (count + 1) / (R + 1), Davison & Hinkley 1997; p is
  never below ``2 / (m + 1)``, and identical runs give exactly 1);
* ``p_mcnemar`` (where the metric is a share of binary per-document outcomes): exact McNemar test
  (``plugins/stats.py``) on the documents whose outcome is defined in both runs; ``b`` = documents with outcome 1
  in A and 0 in B, ``c`` = 0 in A and 1 in B.

Each work's adapter (resampling unit; headline metrics; McNemar on):

* DeMET: matched name pair (``pair_key``: scenario, name slot, both orders); ``mixed_gender_bias``,
  ``pair_bias_*``, ``invalid_rate``; ``invalid_rate``.
* STOP: progression; ``P``, ``P_low/moderate/high``, ``P_counter``, ``sensitivity``, ``invalid_rate``; ``P*``
  (success / "no" per progression).
* multi-agent: scenario (all its runs); ``<response>_bias_score`` (also without degenerate assignments),
  ``<response>_degenerate_rate``, ``<response>_pct_*``, ``invalid_rate``; -- (several agents per document).
* StereoSet: target term (default) or context; ``lms``, ``ss``, ``icat``, ``invalid_rate``; ``ss`` with
  ``averaging: example``, ``invalid_rate``.
* Contact: prompt set; ``bias_pct_*``, ``effect_*``, ``invalid_rate``; ``bias_pct_*``, ``invalid_rate``.
* other tasks: document; metrics whose per-document items are numbers averaged by lm-eval (checked against
  results_*.json); 0/1 metrics.

``significant`` uses McNemar's p where there is one, else the bootstrap p, at ``alpha`` (0.05).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from typing import Any

import numpy as np
from bias_harness.plugins import stats
from bias_harness.plugins.validity import Verdict

ALPHA = 0.05


class RunMismatch(ValueError):
    """The two runs cannot be paired (different tasks, documents or filters)."""


# ---------------------------------------------------------------- what a work declares


@dataclass(frozen=True)
class Unit:
    """A resampling unit: all documents with the same ``key`` travel together in a resample."""

    name: str  # for people, e.g. "matched name pair"
    key: Callable[[dict[str, Any]], Hashable]  # sample record (with "doc" and the metric items) -> unit id
    # item, copy tag -> the item as a separate unit (for aggregations that group items by the unit's id: a unit
    # drawn twice must count twice); None when the aggregation does not group by it
    relabel: Callable[[Any, str], Any] | None = None


def by_document() -> Unit:
    return Unit("document", lambda rec: str(rec["doc_id"]))


def as_tuples(value: Any) -> Any:
    """JSON lists back to the tuples ``process_results`` returned (dicts and scalars unchanged)."""
    if isinstance(value, list):
        return tuple(as_tuples(v) for v in value)
    return value


@dataclass(frozen=True)
class Adapter:
    """How to compare one work's tasks: its headline metrics, their aggregation and the resampling unit."""

    work: str
    detect: Callable[[set[str]], bool]  # metric keys of a sample record -> is this work
    headline: Callable[[set[str]], list[str]]  # metric keys present -> the headline metrics
    # items per metric key (all documents of a resample) -> {headline metric: value}; the work's own aggregations
    values: Callable[[dict[str, list[Any]]], dict[str, float]]
    units: tuple[Unit, ...]  # the first is the default
    outcome: Callable[[str, Any], float | None] | None = None  # metric, item -> 0/1 per document (None: not counted)
    sources: Callable[[list[str]], set[str]] = set  # headline metrics -> the metric keys whose items ``values`` reads
    decode: Callable[[Any], Any] = as_tuples  # a JSON item -> what the aggregation expects

    def unit(self, name: str | None) -> Unit:
        """The unit called ``name`` (spaces or underscores), else the default one."""
        return next((u for u in self.units if name in (u.name, u.name.replace(" ", "_"))), self.units[0])


# ---------------------------------------------------------------- the statistics


def bootstrap_p(deltas: np.ndarray) -> float:
    """Two-sided percentile-bootstrap p-value of H0: difference 0 (see the module docstring)."""
    m = len(deltas)
    if m == 0:
        return math.nan
    le, ge = int(np.sum(deltas <= 0)), int(np.sum(deltas >= 0))
    return float(min(1.0, 2 * min(le + 1, ge + 1) / (m + 1)))


def paired_bootstrap(
    units_a: Sequence[dict[str, list[Any]]],
    units_b: Sequence[dict[str, list[Any]]],
    values: Callable[[dict[str, list[Any]]], dict[str, float]],
    relabel: Callable[[Any, str], Any] | None = None,
    iters: int = stats.BOOTSTRAP_ITERS,
    seed: int = stats.BOOTSTRAP_SEED,
    alpha: float = ALPHA,
) -> dict[str, dict[str, float]]:
    """Differences B - A of every metric of ``values`` over paired resamples of units.

    ``units_a[i]`` / ``units_b[i]``: the items (per metric key) of unit i in each run; the same indices are drawn
    for both runs. Returns {metric: {value_a, value_b, diff, ci_lo, ci_hi, p_bootstrap, n_resamples, n_undefined}}.
    """
    n = len(units_a)
    if n != len(units_b):
        raise ValueError(f"{n} units in run A, {len(units_b)} in run B")

    keys = sorted({k for u in (*units_a, *units_b) for k in u})
    by_key_a = {k: [u.get(k, []) for u in units_a] for k in keys}  # key -> per unit -> items
    by_key_b = {k: [u.get(k, []) for u in units_b] for k in keys}

    def pool(by_key: dict[str, list[list[Any]]], idx: Sequence[int]) -> dict[str, list[Any]]:
        if relabel is None:
            return {k: list(chain.from_iterable(map(per_unit.__getitem__, idx))) for k, per_unit in by_key.items()}
        seen: Counter = Counter()
        copies = []
        for i in idx:
            copies.append(seen[i])
            seen[i] += 1
        out: dict[str, list[Any]] = {}
        for k, per_unit in by_key.items():
            dest = out[k] = []
            for i, copy in zip(idx, copies):
                dest.extend((relabel(it, f"#{copy}") for it in per_unit[i]) if copy else per_unit[i])
        return out

    full = range(n)
    va, vb = values(pool(by_key_a, full)), values(pool(by_key_b, full))
    deltas: dict[str, list[float]] = {k: [] for k in va}
    rng = np.random.default_rng(seed)
    for _ in range(iters if n else 0):
        idx = rng.integers(0, n, size=n).tolist()  # the draws of plugins.stats.bootstrap_ci (same seed, same order)
        ra, rb = values(pool(by_key_a, idx)), values(pool(by_key_b, idx))
        for k in deltas:
            d = rb[k] - ra[k]
            if not math.isnan(d):
                deltas[k].append(d)
    out = {}
    for k, ds in deltas.items():
        arr = np.asarray(ds, dtype=float)
        lo, hi = np.percentile(arr, [100 * alpha / 2, 100 * (1 - alpha / 2)]) if len(arr) else (math.nan, math.nan)
        out[k] = {
            "value_a": va[k],
            "value_b": vb[k],
            "diff": vb[k] - va[k],
            "ci_lo": float(lo),
            "ci_hi": float(hi),
            "p_bootstrap": bootstrap_p(arr),
            "n_resamples": len(arr),
            "n_undefined": iters - len(arr) if n else 0,
        }
    return out


def mcnemar_paired(
    outcomes_a: Sequence[float | None], outcomes_b: Sequence[float | None]
) -> tuple[int, int, int, float]:
    """(b, c, documents counted, exact McNemar p) from per-document 0/1 outcomes of both runs (same order)."""
    b = c = n = 0
    for x, y in zip(outcomes_a, outcomes_b, strict=True):
        if x is None or y is None:
            continue
        n += 1
        b += x == 1 and y == 0
        c += x == 0 and y == 1
    return b, c, n, stats.mcnemar(b, c, exact=True)


# ---------------------------------------------------------------- what a difference says

CHANGE = "change in bias"
NO_CHANGE = "no significant change in bias"
FAILED = "not a change in bias (a verdict failed)"


def reads_as(a: Verdict | None, b: Verdict | None, significant: bool) -> str:
    """What a paired difference B - A says, from both runs' verdicts (plugins/validity.py) and the paired test:

    * a verdict failed in either run (not interpretable): not a change in bias;
    * bias in A, no detectable bias in B: a reduction of bias to below detection (with B's MDE), where the paired
      test is significant; the reverse: bias appeared;
    * bias in both (or valid measurements with no null): a change in bias where significant, larger or smaller by
      the distance from the null value;
    * no detectable bias in both: none in either run.
    The same words in ``bias-harness compare``, the model card's significance note and its ``model-index``."""
    from bias_harness.plugins.validity import BIAS, NO_DETECTABLE_BIAS, fmt_mde

    verdicts = [v for v in (a, b) if v is not None]
    if not verdicts:
        return "no bias metric" if significant else "–"
    if not all(v.interpretable for v in verdicts):
        return FAILED
    if a is None or b is None:
        return CHANGE if significant else NO_CHANGE
    oa, ob = a.outcome, b.outcome
    if oa == BIAS and ob == NO_DETECTABLE_BIAS:
        below = f"to below detection (MDE {fmt_mde(b.mde)})"
        return (
            f"reduction of bias {below}" if significant else "below detection in B, but the change is not significant"
        )
    if oa == NO_DETECTABLE_BIAS and ob == BIAS:
        return (
            "bias appeared (above detection in B)"
            if significant
            else "above detection in B, but the change is not significant"
        )
    if oa == ob == NO_DETECTABLE_BIAS:
        return "no detectable bias in either run"
    if not significant:
        return NO_CHANGE
    ta, tb = a.test, b.test
    if ta is not None and tb is not None and ta.value is not None and tb.value is not None:
        smaller = abs(tb.value - tb.null) < abs(ta.value - ta.null)
        return f"{CHANGE}: {'reduced' if smaller else 'increased'}"
    return CHANGE


# ---------------------------------------------------------------- runs and documents


@dataclass
class MetricComparison:
    task: str
    filter: str
    metric: str
    unit: str
    n_units: int
    n_docs: int
    value_a: float
    value_b: float
    diff: float
    ci_lo: float
    ci_hi: float
    p_bootstrap: float
    n_resamples: int
    n_undefined: int = 0
    p_mcnemar: float | None = None
    mcnemar_b: int | None = None
    mcnemar_c: int | None = None
    mcnemar_n: int | None = None
    recorded_a: float | None = None  # what lm-eval wrote in results_*.json
    recorded_b: float | None = None
    alpha: float = ALPHA
    # each run's interpretability verdict on the metric (plugins/validity.py; None: no verdict applies to it)
    verdict_a: Verdict | None = None
    verdict_b: Verdict | None = None

    @property
    def consistent(self) -> bool:
        """The full-run values equal what lm-eval recorded (where it recorded a number)."""
        return all(
            rec is None or (math.isnan(rec) and math.isnan(val)) or math.isclose(rec, val, rel_tol=1e-6, abs_tol=1e-9)
            for rec, val in ((self.recorded_a, self.value_a), (self.recorded_b, self.value_b))
        )

    @property
    def p(self) -> float:
        return self.p_mcnemar if self.p_mcnemar is not None else self.p_bootstrap

    @property
    def test(self) -> str:
        return "McNemar (exact)" if self.p_mcnemar is not None else "paired bootstrap"

    @property
    def significant(self) -> bool:
        return not math.isnan(self.p) and self.p < self.alpha

    @property
    def reads_as(self) -> str:
        """What the difference says about bias (:func:`reads_as`)."""
        return reads_as(self.verdict_a, self.verdict_b, self.significant)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if not k.startswith("verdict_")}
        for r, v in (("a", self.verdict_a), ("b", self.verdict_b)):
            out |= {f"verdict_{r}": v.text() if v else None, f"outcome_{r}": v.outcome if v else None}
            out[f"mde_{r}"] = v.mde if v else None
        return {
            **out,
            "p": self.p,
            "test": self.test,
            "significant": self.significant,
            "consistent": self.consistent,
            "reads_as": self.reads_as,
        }


@dataclass
class Comparison:
    run_a: str
    run_b: str
    label_a: str
    label_b: str
    iters: int
    seed: int
    metrics: list[MetricComparison] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # task -> why it was not compared

    def to_dict(self) -> dict[str, Any]:
        return _json_safe(
            {
                "run_a": self.run_a,
                "run_b": self.run_b,
                "model_a": self.label_a,
                "model_b": self.label_b,
                "iters": self.iters,
                "seed": self.seed,
                "alpha": ALPHA,
                "metrics": [m.to_dict() for m in self.metrics],
                "skipped": self.skipped,
            }
        )

    def find(self, task: str, metric: str, filt: str | None = None) -> MetricComparison | None:
        return next(
            (m for m in self.metrics if m.task == task and m.metric == metric and (filt is None or m.filter == filt)),
            None,
        )


def _json_safe(value: Any) -> Any:
    """NaN -> None (strict JSON)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _by_filter(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for rec in records:
        out.setdefault(str(rec.get("filter", "none")), {})[str(rec["doc_id"])] = rec
    return out


def _examples(ids: set[str], k: int = 5) -> str:
    def order(x: str) -> tuple[int, Any]:
        return (0, int(x)) if x.isdigit() else (1, x)

    first = sorted(ids, key=order)[:k]
    return ", ".join(first) + (", ..." if len(ids) > k else "")


def match_documents(
    task: str, records_a: list[dict[str, Any]], records_b: list[dict[str, Any]], run_a: str, run_b: str
) -> dict[str, list[tuple[dict, dict]]]:
    """{filter: [(record A, record B) per document]}; :class:`RunMismatch` naming the task and doc ids otherwise."""
    fa, fb = _by_filter(records_a), _by_filter(records_b)
    if set(fa) != set(fb):
        raise RunMismatch(f"task {task}: different filters: {sorted(fa)} in {run_a}, {sorted(fb)} in {run_b}")
    out = {}
    for filt in fa:
        a, b = fa[filt], fb[filt]
        only_a, only_b = set(a) - set(b), set(b) - set(a)
        if only_a or only_b:
            parts = [
                f"{len(s)} doc id(s) only in {r} ({_examples(s)})" for s, r in ((only_a, run_a), (only_b, run_b)) if s
            ]
            raise RunMismatch(
                f"task {task}: the runs are on different documents: "
                + "; ".join(parts)
                + " (same --limit / --samples for both runs?)"
            )
        changed = {
            d for d in a if a[d].get("doc_hash") and b[d].get("doc_hash") and a[d]["doc_hash"] != b[d]["doc_hash"]
        }
        if changed:
            raise RunMismatch(
                f"task {task}: {len(changed)} document(s) differ in content between {run_a} and {run_b} "
                f"(doc_hash of doc id(s) {_examples(changed)}): different dataset versions?"
            )
        ids = sorted(a, key=lambda x: (0, int(x)) if x.isdigit() else (1, x))  # type: ignore[return-value]
        out[filt] = [(a[d], b[d]) for d in ids]
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compare_task(
    task: str,
    pairs: list[tuple[dict, dict]],
    adapter: Adapter,
    filt: str,
    unit_name: str | None = None,
    iters: int = stats.BOOTSTRAP_ITERS,
    seed: int = stats.BOOTSTRAP_SEED,
    recorded: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
) -> list[MetricComparison]:
    """Every headline metric of one task and filter: difference, paired-bootstrap CI and p, McNemar where binary."""
    headline = adapter.headline(set(pairs[0][0].get("metrics") or []))
    keys = adapter.sources(headline)
    unit = adapter.unit(unit_name)
    order: dict[Hashable, int] = {}
    units_a: list[dict[str, list[Any]]] = []
    units_b: list[dict[str, list[Any]]] = []
    for ra, rb in pairs:
        ua, ub = unit.key(ra), unit.key(rb)
        if ua != ub:
            raise RunMismatch(
                f"task {task}: doc id {ra['doc_id']} belongs to unit {ua!r} in one run and {ub!r} in the other"
            )
        i = order.setdefault(ua, len(order))
        if i == len(units_a):
            units_a.append({k: [] for k in keys})
            units_b.append({k: [] for k in keys})
        for k in keys:
            units_a[i][k].append(adapter.decode(ra.get(k)))
            units_b[i][k].append(adapter.decode(rb.get(k)))

    def values(items: dict[str, list[Any]]) -> dict[str, float]:
        vals = adapter.values(items)
        return {m: float(vals[m]) for m in headline}

    boot = paired_bootstrap(units_a, units_b, values, relabel=unit.relabel, iters=iters, seed=seed)
    out = []
    for m in headline:
        r = boot[m]
        cmp = MetricComparison(
            task=task,
            filter=filt,
            metric=m,
            unit=unit.name,
            n_units=len(units_a),
            n_docs=len(pairs),
            recorded_a=_number(recorded[0].get(f"{m},{filt}")),
            recorded_b=_number(recorded[1].get(f"{m},{filt}")),
            **r,
        )
        if adapter.outcome is not None:
            oa = [adapter.outcome(m, adapter.decode(ra.get(m))) for ra, _ in pairs]
            ob = [adapter.outcome(m, adapter.decode(rb.get(m))) for _, rb in pairs]
            if any(x is not None for x in oa) and any(x is not None for x in ob):
                cmp.mcnemar_b, cmp.mcnemar_c, cmp.mcnemar_n, cmp.p_mcnemar = mcnemar_paired(oa, ob)
        out.append(cmp)
    return out


# ---------------------------------------------------------------- helpers for the works' adapters
# (plugins/<work>/paired.py)


def mean(items: Sequence[Any]) -> float:
    vals = [float(x) for x in items if x is not None]
    return float(np.mean(vals)) if vals else math.nan


def binary(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x in (0, 1) else None


def replace_tag(item: Any, index: int, tag: str) -> Any:
    if not isinstance(item, (tuple, list)) or len(item) <= index:
        return item
    return (*item[:index], f"{item[index]}{tag}", *item[index + 1 :])


def _generic(keys: set[str], records: Sequence[dict[str, Any]]) -> Adapter | None:
    """Metrics whose items are numbers (lm-eval's ``mean``-aggregated metrics such as ``acc``), unit = document.

    The aggregation is not known from the samples: :func:`bias_harness.report.compare.compare_runs` keeps such a metric
    only when the mean of its items equals what lm-eval recorded for it in both runs.
    """
    numeric = sorted(
        k
        for k in keys
        if all(r.get(k) is None or binary(r.get(k)) is not None or isinstance(r.get(k), float) for r in records)
        and any(r.get(k) is not None for r in records)
    )
    if not numeric:
        return None
    binary_keys = {k for k in numeric if all(r.get(k) is None or binary(r.get(k)) is not None for r in records)}
    return Adapter(
        work="generic",
        detect=lambda _: True,
        headline=lambda ks: [k for k in numeric if k in ks],
        values=lambda items: {k: mean(v) for k, v in items.items()},
        units=(by_document(),),
        outcome=lambda metric, item: binary(item) if metric in binary_keys else None,
    )


def adapter_for(keys: set[str], records: Sequence[dict[str, Any]] = ()) -> Adapter | None:
    """The adapter of the work whose metric keys these are (each work's ``plugins/<work>/paired.py``; the generic
    one for other tasks, or None)."""
    from bias_harness import works

    for module in works.modules("paired"):
        adapter = module.adapter()
        if adapter.detect(keys):
            return adapter
    return _generic(keys, records)
