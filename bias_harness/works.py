"""The works registry: each work is a package ``bias_harness.plugins.<work>`` that has a ``report`` module.

A work lives in three folders named after it: ``tasks/<work>/`` (lm-eval YAMLs and README),
``plugins/<work>/`` (metrics, parsing, prompts, dialogue, paired-comparison adapter, report section) and
``datasets_src/<work>/`` (builder, schema, generator, annotation files). The report and ``bias-harness compare``
find a work's parts here, by that convention; nothing lists the works by hand (docs/adding_a_work.md).
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType


def _plugins_dirs() -> list[Path]:
    """The folders of ``bias_harness.plugins``, found without importing it (its import registers with lm-eval)."""
    spec = importlib.util.find_spec("bias_harness.plugins")
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


@cache
def names() -> tuple[str, ...]:
    """Every work, sorted: the subpackages of ``bias_harness.plugins`` with a ``report`` module."""
    return tuple(sorted({d.name for root in _plugins_dirs() for d in root.iterdir() if (d / "report.py").is_file()}))


def having(part: str) -> tuple[str, ...]:
    """The works with a ``plugins/<work>/<part>.py`` (e.g. ``rescore``), without importing anything."""
    return tuple(w for w in names() if any((root / w / f"{part}.py").is_file() for root in _plugins_dirs()))


def modules(part: str) -> list[ModuleType]:
    """``bias_harness.plugins.<work>.<part>`` of every work that has one (e.g. ``report``, ``paired``)."""
    return [importlib.import_module(f"bias_harness.plugins.{w}.{part}") for w in having(part)]
