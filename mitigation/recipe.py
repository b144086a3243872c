"""What a recipe is: :class:`Recipe` (which TRL config, which training data, which evaluation tasks), the options
that change its training data (:class:`DataOptions`) and named sets of its config values (:class:`Preset`).

A recipe's *training* settings live in ``mitigation/<name>.yaml`` (TRL's own config format, so
``trl sft --config mitigation/<name>.yaml`` runs it too). What TRL cannot express is declared here: how the
training data is built from our datasets, which lm-eval tasks measure the effect, whether the recipe needs a chat
template, and the limitations that go into the model card. Each work declares its recipes in
``mitigation/<work>.py`` (:mod:`bias_harness.mitigation.recipes` finds them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
from bias_harness.mitigation import recipes_dir


class RecipeError(ValueError):
    """Bad recipe input (unknown recipe, unusable model, empty or malformed training data), raised before training."""


@dataclass(frozen=True)
class DataOptions:
    """Choices that change the training data (recorded in the model card)."""

    setting: int | None = None  # scd: the paper's fine-tuning setting 1..8
    seed: int = 0
    data_dir: str | None = None  # built datasets (default: BIAS_HARNESS_DATA_DIR)
    max_train_rows: int | None = (
        None  # small budgets: N training rows (spread over the data's strata where it has them)
    )
    categories: tuple[str, ...] | None = None  # refine_lm: UnQover categories to train on (None: the recipe's default)
    pairs_per_item: int | None = None  # refine_lm: subject pairs per (template, attribute); None: all (the reference)
    name_slots: int | None = None  # demet_clp: name pairs (slots) per scenario and relationship type; None: all
    both_orders: bool = False  # demet_clp: each twin also with its options listed the other way round


@dataclass(frozen=True)
class HeldOut:
    """What a recipe trains on and what judges it, counted on the data: the card's "Held-out evaluation".

    ``unit`` is what the split separates (a progression's scenario, a scenario, a question ...); ``overlap`` the
    counts of what training and evaluation still share (0: nothing of that kind), each with what was counted."""

    unit: str  # the split's unit, plural ("scenarios")
    how: str  # the split in a sentence: which part trains, which evaluates, seeded / stratified how
    train_rows: int  # training rows of this run (after --max-train-rows)
    train_units: int  # units those rows come from
    eval_units: dict[str, int]  # task -> units it evaluates (the whole task, before --limit)
    eval_docs: dict[str, int]  # task -> documents (the whole task, before --limit)
    overlap: tuple[tuple[str, int], ...] = ()  # (what was counted, count)
    note: str = ""
    eval_unit: str = ""  # the evaluation's unit where it differs (another dataset); default: ``unit``

    def text(self) -> str:
        """The split in one paragraph: sizes, the split and the counted overlap."""
        unit = self.eval_unit or self.unit
        tasks = "; ".join(
            f"`{t}`: {self.eval_docs[t]:,} documents ({self.eval_units.get(t, 0):,} {unit})" for t in self.eval_docs
        )
        shared = "; ".join(f"{what}: {n:,}" for what, n in self.overlap) or "not counted"
        return (
            f"Trained on {self.train_rows:,} rows from {self.train_units:,} {self.unit}; evaluated on {tasks}. "
            f"{self.how} Overlap counted on the data: {shared}." + (f" {self.note}" if self.note else "")
        )

    def summary(self) -> str:
        """One line for the ``model-index`` and the results page."""
        units = ", ".join(f"{t} {n:,}" for t, n in self.eval_units.items())
        held = f"{self.unit} / {self.eval_unit}" if self.eval_unit else self.unit
        return f"held out by {held}: train {self.train_units:,} ({self.train_rows:,} rows), eval {units}"

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**asdict(self), "overlap": [list(o) for o in self.overlap]}


def data_options(cfg: Any) -> dict[str, Any]:
    """DataOptions fields a recipe's config sets (refine_lm: ``categories``, ``pairs_per_item`` script arguments)."""
    out: dict[str, Any] = {}
    cats = getattr(cfg.script, "categories", None)
    if cats:
        out["categories"] = tuple(
            c.strip() for item in ([cats] if isinstance(cats, str) else cats) for c in str(item).split(",") if c.strip()
        )
    pairs = getattr(cfg.script, "pairs_per_item", None)
    if pairs is not None and int(pairs) > 0:
        out["pairs_per_item"] = int(pairs)
    slots = getattr(cfg.script, "name_slots", None)
    if slots is not None and int(slots) > 0:
        out["name_slots"] = int(slots)
    if getattr(cfg.script, "both_orders", None) is not None:
        out["both_orders"] = bool(cfg.script.both_orders)
    return out


@dataclass(frozen=True)
class Preset:
    """A named set of a recipe's config values (``bias-harness mitigate RECIPE --preset NAME``; ``--set`` wins)."""

    summary: str
    values: tuple[tuple[str, Any], ...]  # (TRL config key, value), passed like --set overrides


@dataclass(frozen=True)
class Recipe:
    name: str
    trainer: str  # "sft" | "grpo" | "refine_lm": the TRL script (or our module) whose parser reads the YAML
    summary: str
    source: str  # the paper the recipe follows
    build: Callable[[DataOptions], datasets.DatasetDict]
    eval_tasks: Callable[[DataOptions], list[str]]
    datasets: tuple[str, ...]  # bias-harness datasets the training data comes from (card links)
    chat: bool = True  # trains on chat messages: the model needs a chat template
    model_kind: str = "causal"  # "causal" (lm-eval `hf`) or "mlm" (lm-eval `hf-mlm`)
    limitations: str = ""
    settings: tuple[int, ...] = ()  # allowed --setting values (empty: the recipe has none)
    openai_epochs: int | None = (
        None  # n_epochs for the OpenAI fine-tuning job (Borah & Mihalcea 2024 fine-tune gpt-35-turbo)
    )
    eval_metadata: Callable[[DataOptions], dict[str, Any]] | None = None  # task metadata for the evaluation
    include_tasks: bool = False  # evaluation also needs mitigation/tasks (our held-out task definitions)
    eval_model_args: Callable[[Any, str], dict[str, Any]] | None = (
        None  # (parsed config, base model) -> extra model_args
    )
    local_tasks: Callable[[Path], list[str]] | None = None  # writes task YAMLs into a folder, returns include paths
    presets: tuple[tuple[str, Preset], ...] = ()  # (name, preset): named alternatives to the YAML's values
    check_config: Callable[[Any], None] | None = None  # parsed config -> raise RecipeError before any evaluation
    # model -> the recipe as it runs on that model (refine_lm: its masked-LM or causal-LM form), before anything else
    for_model: Callable[[str], Recipe] | None = None
    # (data options, the run's training data) -> the split between training and evaluation, counted (the card)
    heldout: Callable[[DataOptions, datasets.DatasetDict], HeldOut] | None = None
    # data options -> {task: document indices}: the held-out documents of tasks that also hold training documents
    # (lm-eval's --samples; --limit N keeps the first N of each)
    eval_samples: Callable[[DataOptions], dict[str, list[int]]] | None = None

    @property
    def config_path(self) -> Path:
        return recipes_dir() / f"{self.name}.yaml"

    def preset(self, name: str) -> dict[str, Any]:
        """The config values of preset ``name`` (RecipeError for an unknown one)."""
        presets = dict(self.presets)
        if name not in presets:
            known = ", ".join(presets) or "none"
            raise RecipeError(f"recipe '{self.name}' has no preset '{name}' (presets: {known})")
        return dict(presets[name].values)

    def load_config(self) -> dict[str, Any]:
        import yaml

        with open(self.config_path, encoding="utf-8") as f:
            return yaml.safe_load(f)


def fixed(*tasks: str) -> Callable[[DataOptions], list[str]]:
    """``eval_tasks`` of a recipe whose evaluation tasks do not depend on its options."""
    return lambda opts: list(tasks)
