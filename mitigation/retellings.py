"""DeMET's scenarios as texts, and the GPT-4-written ones that retell a human-written one: shared by the recipes that
train on the GPT-4 scenarios and judge on the human-written ones (``demet_clp``, ``counterfactual_grpo``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_harness.mitigation import overlap
from bias_harness.mitigation.recipe import DataOptions
from bias_harness.mitigation.training_data import load


def demet_scenarios(prompts: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """scenario id -> its text with the names masked (NAME1, NAME2), from a DeMET ``prompts`` split."""
    out: dict[int, str] = {}
    for p in prompts:
        if p["scenario_id"] not in out:
            out[p["scenario_id"]] = p["scenario"].replace(p["name1"], "NAME1").replace(p["name2"], "NAME2")
    return out


def demet_prompts(opts: DataOptions, dataset: str) -> list[dict[str, Any]]:
    ds = load(dataset, "prompts", opts)
    return list(ds[next(iter(ds))])


def demet_retellings(opts: DataOptions) -> list[tuple[int, int, float]]:
    """(GPT-4 scenario, human-written scenario, word overlap) of every GPT-4 DeMET scenario that retells a
    human-written one (:data:`~bias_harness.mitigation.overlap.RETELLING`): #3 and #7 retell #14 (a new car or
    saving), #20 retells #20 (private or public school)."""
    return overlap.retellings(
        demet_scenarios(demet_prompts(opts, "demet_gpt4")), demet_scenarios(demet_prompts(opts, "demet"))
    )
