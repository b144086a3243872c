"""Recipes of the multi-agent work (Borah & Mihalcea 2024): SFT on the paper's Fine-tune dataset, full and half;
and ``counterfactual_grpo``, GRPO with name-swap rewards (:mod:`bias_harness.mitigation.rewards`) on the multi-agent
scenarios and the GPT-4-written DeMET scenarios (the two datasets are loaded by name; no other work's code is used)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import datasets
from bias_harness.mitigation import overlap
from bias_harness.mitigation.recipe import DataOptions, HeldOut, Recipe, fixed
from bias_harness.mitigation.retellings import demet_prompts, demet_retellings, human_overlap
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


def runs_per_scenario() -> int:
    """Sampled runs per Test scenario of the multi-agent generation tasks (their loader's default: the paper's five)."""
    from bias_harness.plugins.multiagent.prompts import load_runs

    return int(inspect.signature(load_runs).parameters["runs"].default)


def _split(opts: DataOptions, name: str) -> datasets.Dataset:
    ds = load("multiagent", name, opts)
    return ds[next(iter(ds))]


def scenario_texts(opts: DataOptions, name: str) -> dict[str, str]:
    """scenario id -> its description and tasks, of the multi-agent ``scenarios`` or ``test`` dataset."""
    return {r["id"]: f"{r['description']} {' '.join(r['tasks'])}" for r in _split(opts, name)}


def _test_overlap(train_texts: Sequence[str], opts: DataOptions) -> tuple[tuple[str, int], ...]:
    """What the multi-agent Test set (32 scenarios) shares with training texts: verbatim, near duplicates."""
    test = list(scenario_texts(opts, "test").values())
    return (
        ("Test scenarios that training holds verbatim", overlap.verbatim(test, train_texts)),
        (
            f"Test scenarios with a near duplicate in training (word overlap >= {overlap.RETELLING})",
            len(overlap.near_duplicates(test, train_texts, overlap.RETELLING)),
        ),
    )


def eval_sizes(tasks: Sequence[str], opts: DataOptions) -> tuple[dict[str, int], dict[str, int]]:
    """(units, documents) of the multi-agent tasks among ``tasks``: detection's dev scenarios, the Test scenarios x
    runs."""
    units, docs = {}, {}
    for task in tasks:
        if task == "multiagent_detect":
            units[task] = docs[task] = len(load("multiagent", "finetune", opts)["full_dev"])
        elif task.startswith("multiagent_test_"):
            units[task] = len(_split(opts, "test"))
            docs[task] = units[task] * runs_per_scenario()
    return units, docs


def finetune_heldout(half: bool) -> Callable[[DataOptions, datasets.DatasetDict], HeldOut]:
    """The Fine-tune recipes' split: training scenarios (the train part of full / half) against the dev scenarios
    that detection is judged on and the separate Test set of the generation tasks."""

    def heldout(opts: DataOptions, data: datasets.DatasetDict) -> HeldOut:
        ft = load("multiagent", "finetune", opts)
        train = list(ft["half_train" if half else "full_train"]["scenario"])[: len(data["train"])]
        dev = list(ft["full_dev"]["scenario"])
        units, docs = eval_sizes(EVAL_TASKS, opts)
        test = list(scenario_texts(opts, "test").values())
        return HeldOut(
            unit="scenarios",
            how="The paper's own split: the Fine-tune dataset's train part trains (its dev part is the trainer's "
            "evaluation loss, not trained on); detection is judged on the dev part, the assignments on the separate "
            "Test set.",
            train_rows=len(data["train"]),
            train_units=len(train),
            eval_units=units,
            eval_docs=docs,
            overlap=(
                ("detection (dev) scenarios that training holds verbatim", overlap.verbatim(dev, train)),
                (
                    f"detection scenarios with a near duplicate in training (word overlap >= {overlap.RETELLING})",
                    len(overlap.near_duplicates(dev, train, overlap.RETELLING)),
                ),
                *_test_overlap(train, opts),
            ),
            note=f"Largest word overlap of a dev scenario with a training one: {overlap.largest(dev, train):.2f}; "
            f"of a Test scenario: {overlap.largest(test, train):.2f}.",
        )

    return heldout


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
    """Prompt twins (names / genders swapped) from DeMET's GPT-4 scenarios (less those that retell a human-written
    one) and the multi-agent Scenarios dataset."""
    from bias_harness.mitigation.rewards import counterfactual_rows

    retold = {g for g, _, _ in demet_retellings(opts)}
    demet = [p for p in demet_prompts(opts, "demet_gpt4") if p["scenario_id"] not in retold]
    sources = {"demet": demet, "multiagent": list(_split(opts, "scenarios"))}
    return datasets.DatasetDict({"train": datasets.Dataset.from_list(counterfactual_rows(sources, seed=opts.seed))})


def counterfactual_heldout(opts: DataOptions, data: datasets.DatasetDict) -> HeldOut:
    """counterfactual_grpo's split: GPT-4 DeMET scenarios and the multi-agent Scenarios train; the human-written
    DeMET scenarios and the multi-agent Test set judge."""
    scen = set(data["train"]["scenario"])
    trained_demet = [int(s.split(":", 1)[1]) for s in scen if s.startswith("demet:")]
    human, human_prompts, demet_counts, note = human_overlap(opts, trained_demet, "DeMET ")
    ma = scenario_texts(opts, "scenarios")
    trained_ma = [ma[s.split(":", 1)[1]] for s in scen if s.startswith("multiagent:")]
    units, docs = eval_sizes(["multiagent_test_nointeraction"], opts)
    test_names = {n for r in _split(opts, "test") for n in r["characters"]}
    ma_names = {n for r in _split(opts, "scenarios") for n in r["characters"]}
    retold = demet_retellings(opts)
    return HeldOut(
        unit="scenarios",
        how=f"Split by scenario: the GPT-4-written DeMET scenarios (less {len(retold)} that retell a human-written "
        f"one: GPT-4 {', '.join(f'#{g} ~ human #{h} ({s:.2f})' for g, h, s in retold) or 'none'}) and the multi-agent "
        "Scenarios train; the human-written DeMET scenarios and the multi-agent Test set evaluate. The names are "
        "shared (DeMET draws every prompt's names from one list of 30).",
        train_rows=len(data["train"]),
        train_units=len(scen),
        eval_units={"demet": human, **units},
        eval_docs={"demet": human_prompts, **docs},
        overlap=(
            *demet_counts[:2],
            *_test_overlap(trained_ma, opts),
            demet_counts[2],
            ("Test character names that training scenarios also use", overlap.shared(test_names, ma_names)),
        ),
        note=note,
    )


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
        heldout=finetune_heldout(half),
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
        heldout=counterfactual_heldout,
        limitations=(
            "Counterfactual consistency is rewarded only when both members of a swapped pair and other scenarios of "
            "the same work are in the same generation batch (the recipe lays the twins out in blocks of 4 twins of "
            "one work, keeps them adjacent and turns dataset shuffling off; a batch of 32 = 8 prompts x 4 "
            "generations holds one block). Answers are read by the evaluation's parsers; the reward checks the "
            "answer's position/assignment, not its reasoning. Trained on the GPT-4 DeMET scenarios less those that "
            "retell a human-written one; evaluated on the 29 human-written ones (see Held-out evaluation)."
        ),
    ),
)
