"""The shared lm-eval task class: headline metrics in lm-eval's table, the breakdowns on request, the task's settings
handed to ``process_results`` and the aggregations.

Metrics. A task YAML lists its headline metrics in ``metric_list`` (what a reader of the paper looks for, with their
CI bounds: what lm-eval prints, about 15 rows at most) and names the work's breakdown table once, in its metadata::

    metadata:
      breakdowns: bias_harness.plugins.demet.metrics.breakdowns

The table is a function ``(task config) -> metric entries`` in the work's own ``metrics.py`` (entries in
``metric_list``'s format, aggregations as callables): the same metrics per topic, scenario type, demographic, bias
type, axis ... They are added to the task's metrics with one switch, ``breakdown: true`` in the task's metadata or
for every task of a run::

    lm_eval ... --tasks stop --metadata '{"breakdown": true}'

``bias-harness report`` always shows the breakdowns, computed from the logged samples. An entry with
``when: <metadata key>`` is also active whenever that key is set (STOP's ``human_*`` metrics with ``human_file``).
A YAML may instead list the entries itself in ``metadata.breakdown_metrics``; the task writes the entries it resolved
there, so a results file's config says which of its metrics are breakdowns.

Settings. The task's metadata (YAML ``metadata`` merged with ``--metadata`` and ``--model_args``) reaches
``process_results`` as its ``settings`` keyword when the function has one, and each aggregation as its ``settings``
keyword likewise (bound per task with :func:`functools.partial`: two tasks of one run keep their own settings);
an aggregation with a ``metric`` keyword also gets the name of the metric it computes (one aggregation serves a kind
of metric). An aggregation may list the metrics it serves in a ``metrics`` attribute; naming it for another metric
is an error.

``process_results`` may return every key it knows; the task keeps those of its active metrics (lm-eval would
otherwise average an undeclared key and print it). Aggregations follow lm-eval's ``tasks/bbq/utils.py``: one
function per kind of metric; a per-subset key holds the document's item for documents of that subset and ``None``
elsewhere, and the kind's aggregation drops the ``None`` items.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import datasets
from lm_eval.api.task import ConfigurableTask

SWITCH = "breakdown"
TABLE = "breakdowns"  # metadata key: dotted path of the work's breakdown table
LIST = "breakdown_metrics"  # metadata key: the breakdown entries (listed in a YAML, or resolved from TABLE)

MetricEntry = dict[str, Any]


def breakdown_on(metadata: dict[str, Any] | None) -> bool:
    value = (metadata or {}).get(SWITCH, False)
    return value is True or str(value).lower() in ("1", "true", "yes")


def entries(
    keys: Sequence[str],
    aggregation: Callable[[str], Callable],
    higher_is_better: Callable[[str], bool],
    when: dict[str, str] | None = None,
) -> list[MetricEntry]:
    """Metric entries in ``metric_list``'s format for ``keys``, from the work's per-key rules."""
    out = []
    for key in keys:
        entry = {"metric": key, "aggregation": aggregation(key), "higher_is_better": higher_is_better(key)}
        if when and key in when:
            entry["when"] = when[key]
        out.append(entry)
    return out


def _import(path: str) -> Callable[[dict[str, Any]], Sequence[MetricEntry]]:
    module, _, name = str(path).rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"metadata {TABLE}: cannot import {path!r} ({err})") from err


def breakdown_entries(config: dict[str, Any]) -> list[MetricEntry]:
    """The breakdown entries of a task config: ``metadata.breakdown_metrics`` if listed, else the work's table."""
    metadata = config.get("metadata") or {}
    if metadata.get(LIST):
        return list(metadata[LIST])
    return list(_import(metadata[TABLE])(config)) if metadata.get(TABLE) else []


def with_breakdowns(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The task config with its breakdown entries in ``metadata.breakdown_metrics``, appended to ``metric_list`` when
    the switch is on."""
    if not config:
        return config
    metadata = config.get("metadata") or {}
    table = breakdown_entries(config)
    if not table:
        return config
    config = {**config, "metadata": {**metadata, LIST: table}}
    on = breakdown_on(metadata)
    # an entry with `when: <metadata key>` is also active whenever that key is set (e.g. STOP's human_* metrics
    # with `human_file`): what a user asked for explicitly is shown without the switch
    extra = [m for m in table if on or (m.get("when") and metadata.get(m["when"]))]
    have = {m["metric"] for m in config.get("metric_list") or []}
    extra = [{k: v for k, v in m.items() if k != "when"} for m in extra if m["metric"] not in have]
    return {**config, "metric_list": list(config.get("metric_list") or []) + extra}


def keep_active(task: ConfigurableTask, metrics: dict[str, Any]) -> dict[str, Any]:
    """``process_results`` output restricted to the task's active metrics (headline, plus breakdowns if on)."""
    active = task.aggregation()
    return {k: v for k, v in metrics.items() if k in active}


def _takes(fn: Callable, name: str) -> bool:
    target = fn.func if isinstance(fn, partial) else fn
    try:
        return name in inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False


def bind(fn: Callable, metric: str, settings: dict[str, Any], task: str = "") -> Callable:
    """``fn`` with the ``metric`` name and the task's ``settings`` bound where it takes them."""
    served = getattr(fn, "metrics", None)
    if served is not None and metric not in served:
        raise ValueError(f"{task}: metric {metric} has aggregation {fn.__name__}, which serves {', '.join(served)}")
    bound = {k: v for k, v in (("metric", metric), ("settings", settings)) if _takes(fn, k)}
    return partial(fn, **bound) if bound else fn


class BreakdownTask(ConfigurableTask):
    """The bias-harness task class (``class: !function bias_harness.plugins.breakdown.BreakdownTask``): the
    breakdown switch and the task's settings handed to ``process_results`` and the aggregations (module docstring)."""

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        cfg = {k: v for k, v in (config or {}).items() if k != "class"}
        super().__init__(config=with_breakdowns(cfg), **kwargs)
        self.settings: dict[str, Any] = dict(self.config.metadata or {})
        for name, fn in self._aggregation_list.items():
            if callable(fn):
                self._aggregation_list[name] = bind(fn, name, self.settings, self.config.task or "")

    def fewshot_docs(self) -> Any:
        """lm-eval lists the few-shot pool when it builds a task, even for zero shots: an Arrow split decoded at once
        (``to_list``) instead of row by row (demet_gpt4's task load 0.43 -> 0.03 s; the same dicts)."""
        docs = super().fewshot_docs()
        return docs.to_list() if isinstance(docs, datasets.Dataset) else docs

    def process_results(self, doc: dict, results: list) -> dict[str, Any]:
        fn = self.config.process_results
        if callable(fn) and _takes(fn, "settings"):
            return keep_active(self, fn(doc, results, settings=self.settings))
        return keep_active(self, super().process_results(doc, results))
