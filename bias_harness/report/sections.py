"""The works' report sections (``plugins/<work>/report.py``, found by :mod:`bias_harness.works`)."""

from __future__ import annotations

import math
from types import ModuleType

from bias_harness.runs import Run


def sections() -> list[ModuleType]:
    """Each work's report section (``plugins/<work>/report.py``, found by :mod:`bias_harness.works`)."""
    from bias_harness import works

    mods = [m for m in works.modules("report") if hasattr(m, "render") and hasattr(m, "matches")]
    return sorted(mods, key=lambda m: getattr(m, "ORDER", 100))


def section_name(section: ModuleType) -> str:
    """The work a section belongs to: ``bias_harness.plugins.<work>.report`` -> ``<work>``."""
    parts = section.__name__.split(".")
    return parts[-2] if parts[-1] == "report" else parts[-1]


def section_value(run: Run, task: str, metric: str) -> float | None:
    """A metric that lm-eval did not aggregate, from the section of ``task`` that computes it (``metric_value``)."""
    for section in sections():
        value_of = getattr(section, "metric_value", None)
        if value_of is not None and section.matches(task):
            value = value_of(run, task, metric)
            if isinstance(value, (int, float)) and not math.isnan(value):
                return float(value)
    return None
