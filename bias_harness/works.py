"""The works registry: each work is a package ``bias_harness.plugins.<work>`` that has a ``report`` module.

A work lives in three folders named after it: ``tasks/<work>/`` (lm-eval YAMLs and README),
``plugins/<work>/`` (metrics, parsing, prompts, dialogue, paired-comparison adapter, report section) and
``datasets_src/<work>/`` (builder, schema, generator, annotation files). The report and ``bias-harness compare``
find a work's parts here, by that convention; nothing lists the works by hand (docs/adding_a_work.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import cache
from types import ModuleType


@cache
def names() -> tuple[str, ...]:
    """Every work, sorted: the subpackages of ``bias_harness.plugins`` with a ``report`` module."""
    import bias_harness.plugins as pkg

    found = []
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.ispkg and importlib.util.find_spec(f"{pkg.__name__}.{mod.name}.report") is not None:
            found.append(mod.name)
    return tuple(sorted(found))


def modules(part: str) -> list[ModuleType]:
    """``bias_harness.plugins.<work>.<part>`` of every work that has one (e.g. ``report``, ``paired``)."""
    out = []
    for work in names():
        name = f"bias_harness.plugins.{work}.{part}"
        if importlib.util.find_spec(name) is not None:
            out.append(importlib.import_module(name))
    return out
