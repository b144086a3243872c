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
    return ds[next(iter(ds))].to_list()


def demet_retellings(opts: DataOptions) -> list[tuple[int, int, float]]:
    """(GPT-4 scenario, human-written scenario, word overlap) of every GPT-4 DeMET scenario that retells a
    human-written one (:data:`~bias_harness.mitigation.overlap.RETELLING`): #3 and #7 retell #14 (a new car or
    saving), #20 retells #20 (private or public school)."""
    return overlap.retellings(
        demet_scenarios(demet_prompts(opts, "demet_gpt4")), demet_scenarios(demet_prompts(opts, "demet"))
    )


def human_overlap(
    opts: DataOptions, trained: Sequence[int], what: str = ""
) -> tuple[int, int, tuple[tuple[str, int], ...], str]:
    """The human-written side of a split whose training holds the GPT-4 scenarios ``trained`` (their ids): (human
    scenarios, their prompts, the overlap counted on the data: verbatim, retold, shared names, and the note with the
    largest word overlap). ``what`` names the dataset in the labels (e.g. "DeMET ")."""
    gpt4_prompts = demet_prompts(opts, "demet_gpt4")
    gpt4 = demet_scenarios(gpt4_prompts)
    human_prompts = demet_prompts(opts, "demet")
    human = list(demet_scenarios(human_prompts).values())
    trained_text = [gpt4[s] for s in trained]
    names = {n for p in gpt4_prompts for n in (p["name1"], p["name2"])}
    counts = (
        (f"human-written {what}scenarios that training holds verbatim", overlap.verbatim(human, trained_text)),
        (
            f"human-written {what}scenarios retold in training (word overlap >= {overlap.RETELLING})",
            len(overlap.near_duplicates(human, trained_text, overlap.RETELLING)),
        ),
        (
            f"{what}names of the evaluation used in training",
            overlap.shared({n for p in human_prompts for n in (p["name1"], p["name2"])}, names),
        ),
    )
    note = (
        f"Largest word overlap of a human-written {what}scenario with a trained one: "
        f"{overlap.largest(human, trained_text):.2f}."
    )
    return len(human), len(human_prompts), counts, note
