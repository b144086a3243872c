"""The recipe registry: every work's recipes, from its ``mitigation/<work>.py`` (found by :mod:`bias_harness.works`).

A work's module declares ``RECIPES`` (a tuple of :class:`~bias_harness.mitigation.recipe.Recipe`) and may define
what the shared pipeline asks of each work:

* ``task_metadata(tasks, model) -> dict``: task metadata the work's tasks among ``tasks`` need from the evaluated
  model (any recipe's evaluation);
* ``breakdowns(run_dir) -> {task: tables}`` and ``breakdown_markdown(before, after) -> str``: before/after tables
  of the work's tasks from an evaluation's logged samples (``OUT/eval/breakdowns.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from bias_harness.mitigation.recipe import Recipe, RecipeError

from bias_harness import works


def modules() -> list[ModuleType]:
    """Every work's recipe module (``bias_harness.mitigation.<work>``)."""
    return works.own_modules("mitigation")


RECIPES: dict[str, Recipe] = {recipe.name: recipe for module in modules() for recipe in module.RECIPES}


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise RecipeError(f"unknown recipe '{name}'. Known recipes: {', '.join(RECIPES)}")
    return RECIPES[name]


def hooks(name: str) -> list[Callable[..., Any]]:
    """The works' functions ``name`` (e.g. ``task_metadata``), of each recipe module that defines it."""
    return [getattr(m, name) for m in modules() if hasattr(m, name)]
