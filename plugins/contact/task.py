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


class ContactTask(BreakdownTask):
    """``class: !function bias_harness.plugins.contact.task.ContactTask`` (tasks/contact/_contact_yaml)."""

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        for name, fn in self._aggregation_list.items():
            kind = getattr(fn, "metrics", None)  # the contact kinds (metrics.KINDS) list the metrics they aggregate
            if kind is None:
                continue
            if name not in kind:
                raise ValueError(f"{self.config.task}: metric {name} has aggregation {fn.__name__}, which serves {', '.join(kind)}")
            self._aggregation_list[name] = partial(fn, metric=name)
