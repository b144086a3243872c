"""Headline metrics in lm-eval's results table; the breakdowns on request.

A task YAML declares what it measures in two lists: ``metric_list`` (the headline metrics a reader of the paper looks
for, with their CI bounds: what lm-eval prints, about 15 rows at most) and ``metadata.breakdown_metrics`` (the same
metrics per topic, scenario type, demographic, bias type, axis ...: same entry format). The breakdowns are added to
the task's metrics with one switch, ``breakdown: true`` in the task's metadata or for every task of a run::

    lm_eval ... --tasks stop --metadata '{"breakdown": true}'

``bias-harness report`` always shows the breakdowns, computed from the logged samples. A breakdown entry with
``when: <metadata key>`` is also active whenever that key is set (STOP's ``human_*`` metrics with ``human_file``).

``process_results`` may return every key it knows; the task keeps those of its active metrics (lm-eval would
otherwise average an undeclared key and print it). Aggregations follow lm-eval's ``tasks/bbq/utils.py``: one
function per kind of metric; a per-subset key holds the document's item for documents of that subset and ``None``
elsewhere, and the kind's aggregation drops the ``None`` items.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.task import ConfigurableTask

SWITCH = "breakdown"
LIST = "breakdown_metrics"


def breakdown_on(metadata: dict[str, Any] | None) -> bool:
    value = (metadata or {}).get(SWITCH, False)
    return value is True or str(value).lower() in ("1", "true", "yes")


def with_breakdowns(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The task config with ``metadata.breakdown_metrics`` appended to ``metric_list`` when the switch is on."""
    if not config:
        return config
    metadata = config.get("metadata") or {}
    on = breakdown_on(metadata)
    # an entry with `when: <metadata key>` is also active whenever that key is set (e.g. STOP's human_* metrics
    # with `human_file`): what a user asked for explicitly is shown without the switch
    extra = [m for m in metadata.get(LIST) or [] if on or (m.get("when") and metadata.get(m["when"]))]
    if not extra:
        return config
    have = {m["metric"] for m in config.get("metric_list") or []}
    extra = [{k: v for k, v in m.items() if k != "when"} for m in extra if m["metric"] not in have]
    return {**config, "metric_list": list(config.get("metric_list") or []) + extra}


def keep_active(task: ConfigurableTask, metrics: dict[str, Any]) -> dict[str, Any]:
    """``process_results`` output restricted to the task's active metrics (headline, plus breakdowns if on)."""
    active = task.aggregation()
    return {k: v for k, v in metrics.items() if k in active}


class BreakdownTask(ConfigurableTask):
    """A ConfigurableTask with the breakdown switch (``class: !function bias_harness.plugins.breakdown.BreakdownTask``)."""

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        cfg = {k: v for k, v in (config or {}).items() if k != "class"}
        super().__init__(config=with_breakdowns(cfg), **kwargs)

    def process_results(self, doc: dict, results: list) -> dict[str, Any]:
        return keep_active(self, super().process_results(doc, results))
