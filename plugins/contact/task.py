"""The contact tasks' lm-eval class: the breakdown switch (:class:`~bias_harness.plugins.breakdown.BreakdownTask`) and the
metric name handed to each aggregation.

lm-eval calls a metric's aggregation with the per-doc items only. Every contact metric aggregates the same item
per doc (:func:`bias_harness.plugins.contact.metrics.process_results`; the bias % per contact type, the effects and
the bootstrap CIs over prompt sets all need every contact type of a prompt set), so the YAMLs name one aggregation
per kind of metric (``metrics.KINDS``) and this class binds each to its metric's name.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from bias_harness.plugins.breakdown import BreakdownTask
from bias_harness.plugins.contact.metrics import SCALES


class ContactTask(BreakdownTask):
    """``class: !function bias_harness.plugins.contact.task.ContactTask`` (tasks/contact/_contact_yaml). A task of one
    scale (``dataset_kwargs.scale``) keeps only its own scale's ``invalid_rate_<scale>`` breakdown."""

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        scale = (self.config.dataset_kwargs or {}).get("scale")
        if scale:
            for other in (f"invalid_rate_{s}" for s in SCALES if s != scale):
                tables = (self._metric_fn_list, self._metric_fn_kwargs, self._aggregation_list, self._higher_is_better)
                for table in tables:
                    table.pop(other, None)
        for name, fn in self._aggregation_list.items():
            kind = getattr(fn, "metrics", None)  # the contact kinds (metrics.KINDS) list the metrics they aggregate
            if kind is None:
                continue
            if name not in kind:
                raise ValueError(f"{self.config.task}: metric {name} has aggregation {fn.__name__}, which serves {', '.join(kind)}")
            self._aggregation_list[name] = partial(fn, metric=name)
