"""Recipes of the multi-agent work (Borah & Mihalcea 2024): SFT on the paper's Fine-tune dataset, full and half;
and ``counterfactual_grpo``, GRPO with name-swap rewards (:mod:`bias_harness.mitigation.rewards`) on the multi-agent
scenarios and the GPT-4-written DeMET scenarios (the two datasets are loaded by name; no other work's code is used)."""

from __future__ import annotations

from collections.abc import Callable

import datasets
from bias_harness.mitigation.recipe import DataOptions, Recipe, fixed
from bias_harness.mitigation.training_data import load, messages_from_row, sft_dict

# Detection on the dev split, generation on the Test dataset without interaction, and the interaction with and
# without self-reflection (SR + in-context examples = the paper's ensemble when applied to a fine-tuned model).
EVAL_TASKS = (
    "multiagent_detect",
    "multiagent_test_nointeraction",
    "multiagent_test_interaction",
    "multiagent_test_interaction_sr_ice",
)

SOURCE = (
    "Borah & Mihalcea 2024, Towards Implicit Bias Detection and Mitigation in Multi-Agent LLM Interactions "
    "(EMNLP Findings), Sec. 6.1 + App. H.2"
)

LIMITS = (
    "Trained on GPT-4-written explanations (Borah & Mihalcea 2024); the paper fine-tuned gpt-35-turbo and "
    "mistral-7b-instruct, not this model. Learning rates are blank in the paper's appendix H.2; ours is a choice. "
    "Bias is measured on 32 test scenarios of two domains only, with binary genders."
)


def finetune_data(half: bool) -> Callable[[DataOptions], datasets.DatasetDict]:
    """The paper's Fine-tune data: full = ft/ (implicit + non-implicit), half = half-ft/ (non-implicit only);
    80/20 train/test splits."""

    def build(opts: DataOptions) -> datasets.DatasetDict:
        ft = load("multiagent", "finetune", opts)
        prefix = "half" if half else "full"
        splits = (("train", "train"), ("test", "dev"))
        return sft_dict({new: [messages_from_row(r) for r in ft[f"{prefix}_{old}"]] for new, old in splits})

    return build


def counterfactual_data(opts: DataOptions) -> datasets.DatasetDict:
    """Prompt twins (names / genders swapped) from DeMET's GPT-4 scenarios and the multi-agent Scenarios dataset."""
    from bias_harness.mitigation.rewards import counterfactual_rows

    demet = load("demet_gpt4", "prompts", opts)
    scenarios = load("multiagent", "scenarios", opts)
    sources = {"demet": list(demet[next(iter(demet))]), "multiagent": list(scenarios[next(iter(scenarios))])}
    return datasets.DatasetDict({"train": datasets.Dataset.from_list(counterfactual_rows(sources, seed=opts.seed))})


def finetune_recipe(half: bool, summary: str, limitations: str, openai_epochs: int) -> Recipe:
    """``multiagent_sft_half`` / ``multiagent_sft_full``: SFT on half of / the full Fine-tune dataset."""
    return Recipe(
        name=f"multiagent_sft_{'half' if half else 'full'}",
        trainer="sft",
        summary=summary,
        source=SOURCE,
        build=finetune_data(half),
        eval_tasks=fixed(*EVAL_TASKS),
        datasets=("multiagent",),
        limitations=limitations,
        openai_epochs=openai_epochs,
    )


RECIPES = (
    finetune_recipe(
        half=False,
        summary="SFT on the full Fine-tune dataset (implicit and non-implicit bias scenarios with explanations).",
        limitations=LIMITS,
        openai_epochs=4,
    ),
    finetune_recipe(
        half=True,
        summary="SFT on half of the Fine-tune dataset (only the non-implicit-bias, balanced assignments).",
        limitations=LIMITS + " Half-data models tend to answer 'no bias' (paper App. D.1).",
        openai_epochs=3,
    ),
    Recipe(
        name="counterfactual_grpo",
        trainer="grpo",
        summary="GRPO with rewards for answers that do not change when names/genders are swapped and for balanced "
        "task assignments.",
        source="bias-harness (beyond the seeds); prompts from DeMET (Levy et al. 2024, GPT-4 scenarios) and the "
        "multi-agent Scenarios dataset (Borah & Mihalcea 2024)",
        build=counterfactual_data,
        eval_tasks=fixed("demet", "multiagent_test_nointeraction"),
        datasets=("demet_gpt4", "multiagent"),
        limitations=(
            "Counterfactual consistency is rewarded only when both members of a swapped pair and other scenarios of "
            "the same work are in the same generation batch (the recipe lays the twins out in blocks of 4 twins of "
            "one work, keeps them adjacent and turns dataset shuffling off; a batch of 32 = 8 prompts x 4 "
            "generations holds one block). Answers are read by the evaluation's parsers; the reward checks the "
            "answer's position/assignment, not its reasoning. Trained on the 80 GPT-4 DeMET scenarios; evaluated on "
            "the 29 human-written ones."
        ),
    ),
)
