"""The works registry: each work is a package ``bias_harness.plugins.<work>`` that has a ``report`` module.

A work lives in three folders named after it: ``tasks/<work>/`` (lm-eval YAMLs and README),
``plugins/<work>/`` (metrics, parsing, prompts, dialogue, paired-comparison adapter, report section) and
``datasets_src/<work>/`` (builder, schema, generator, annotation files); its mitigation recipes, if any, in
``mitigation/<work>.py``. The report, ``bias-harness compare``, ``bias-harness data generate`` and the recipe
registry find a work's parts here, by that convention; nothing lists the works by hand (docs/adding_a_work.md).
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType


def _dirs(package: str) -> list[Path]:
    """The folders of ``bias_harness.<package>``, found without importing it (``plugins``' import registers with
    lm-eval)."""
    spec = importlib.util.find_spec(f"bias_harness.{package}")
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


@cache
def names() -> tuple[str, ...]:
    """Every work, sorted: the subpackages of ``bias_harness.plugins`` with a ``report`` module."""
    return tuple(sorted({d.name for root in _dirs("plugins") for d in root.iterdir() if (d / "report.py").is_file()}))


def having(part: str, package: str = "plugins") -> tuple[str, ...]:
    """The works with a ``<package>/<work>/<part>.py`` (e.g. ``plugins/<work>/rescore.py``), without importing
    anything."""
    return tuple(w for w in names() if any((root / w / f"{part}.py").is_file() for root in _dirs(package)))


def modules(part: str, package: str = "plugins") -> list[ModuleType]:
    """``bias_harness.<package>.<work>.<part>`` of every work that has one (e.g. ``report``, ``paired``;
    ``generate`` of ``datasets_src``)."""
    return [importlib.import_module(f"bias_harness.{package}.{w}.{part}") for w in having(part, package)]


def own_modules(package: str) -> list[ModuleType]:
    """``bias_harness.<package>.<work>``, the module ``<package>/<work>.py`` of every work that has one (the
    recipes of ``mitigation``)."""
    found = [w for w in names() if any((root / f"{w}.py").is_file() for root in _dirs(package))]
    return [importlib.import_module(f"bias_harness.{package}.{w}") for w in found]
