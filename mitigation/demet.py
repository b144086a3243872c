"""Recipe of the DeMET work (Levy et al. 2024): ``demet_clp``, counterfactual logit pairing (:mod:`.clp`) on the
name-swapped twins of the GPT-4-written scenarios, judged on the 29 human-written ones (``demet_mc``).

A training group is one GPT-4 scenario with one pair of names of different genders (woman/man, woman/neutral,
neutral/man): the prompt and its twin with the names swapped (DeMET's ``g1_g2`` / ``g2_g1`` relationship types of
one ``pair_key``), each, with ``both_orders``, also with its options listed the other way round (``1. NAME2 /
2. NAME1``). The role scored is the scenario's first person (``NAME1``), behind option 1 in DeMET's own list and
behind option 2 in the reversed one. Pairing the four preferences removes what the names' genders and the options'
order change; the anchor keeps what the scenario decides. The contexts are ``demet_mc``'s own (its
``doc_to_text``), the choices its continuations (" 1", " 2").

Why CLP and not DPO or GRPO here (docs/mitigation.md, "demet_clp"): the evaluation scores two one-token answers by
log-likelihood, so the bias is a property of one logit difference; pairing that difference across twins is the
direct counterfactual objective (Garg et al. 2019), needs no sampled answers (GRPO on a 135M model mostly samples
answers the parsers cannot read) and no preferred answer (DPO needs one; "the other person" is no fair target).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import datasets
from bias_harness.mitigation.recipe import DataOptions, HeldOut, Recipe, fixed
from bias_harness.mitigation.retellings import demet_prompts, demet_retellings, human_overlap

# DeMET's mixed-gender relationship types, each with its name-swapped twin (the pair biases' pairs)
TWINS = (("woman_man", "man_woman"), ("woman_neutral", "neutral_woman"), ("neutral_man", "man_neutral"))
CONTEXT = "{question}\nAnswer:"  # demet_mc.yaml's doc_to_text (tests/shared/test_mitigation_demet.py checks it)
NAME_SLOTS = 5


def reversed_options(question: str, name1: str, name2: str) -> str:
    """The question with its option list the other way round (``1. NAME2`` / ``2. NAME1``)."""
    listed = f"\n1. {name1}\n2. {name2}."
    if question.count(listed) != 1:
        raise ValueError(f"DeMET question without its option list '1. {name1} / 2. {name2}.': {question[-120:]!r}")
    return question.replace(listed, f"\n1. {name2}\n2. {name1}.")


def clp_groups(prompts: list[dict[str, Any]], slots: int | None, both_orders: bool) -> list[dict[str, Any]]:
    """One row per twin (scenario, name pair of different genders, slot < ``slots``): ``contexts`` (the prompt, its
    twin, and with ``both_orders`` each with the options reversed) and ``signs`` (+1 where NAME1 is option 1)."""
    by_key: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for p in prompts:
        if slots is None or p["slot"] < slots:
            by_key[p["pair_key"]][p["relationship"]] = p
    rows = []
    for key in sorted(by_key, key=lambda k: (by_key[k][next(iter(by_key[k]))]["scenario_id"], k)):
        found = by_key[key]
        for a, b in TWINS:
            if a not in found or b not in found:
                continue
            twin = (found[a], found[b])
            if twin[0]["name1"] != twin[1]["name2"] or twin[0]["name2"] != twin[1]["name1"]:
                raise ValueError(f"DeMET prompts {twin[0]['prompt_id']} / {twin[1]['prompt_id']}: names not swapped")
            contexts = [CONTEXT.format(question=p["question"]) for p in twin]
            signs = [1.0, 1.0]
            if both_orders:
                contexts += [
                    CONTEXT.format(question=reversed_options(p["question"], p["name1"], p["name2"])) for p in twin
                ]
                signs += [-1.0, -1.0]
            rows.append(
                {
                    "contexts": contexts,
                    "signs": signs,
                    "scenario_id": twin[0]["scenario_id"],
                    "pair": f"{a}/{b}",
                    "prompt_ids": [p["prompt_id"] for p in twin],
                }
            )
    return rows


def clp_data(opts: DataOptions) -> datasets.DatasetDict:
    """The GPT-4 scenarios' twins (less the scenarios that retell a human-written one)."""
    retold = {g for g, _, _ in demet_retellings(opts)}
    prompts = [p for p in demet_prompts(opts, "demet_gpt4") if p["scenario_id"] not in retold]
    slots = NAME_SLOTS if opts.name_slots is None else opts.name_slots
    rows = clp_groups(prompts, slots, opts.both_orders)
    return datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)})


def clp_heldout(opts: DataOptions, data: datasets.DatasetDict) -> HeldOut:
    """Train: GPT-4 scenarios' twins; evaluate: every prompt of the 29 human-written scenarios (``demet_mc``)."""
    trained = sorted(set(data["train"]["scenario_id"]))
    scenarios, prompts, counts, note = human_overlap(opts, trained)
    retold = demet_retellings(opts)
    return HeldOut(
        unit="scenarios",
        how=f"Split by scenario: the GPT-4-written scenarios train (less {len(retold)} that retell a human-written "
        f"one: {', '.join(f'GPT-4 #{g} ~ human #{h} ({s:.2f})' for g, h, s in retold) or 'none'}); every prompt of "
        "the 29 human-written scenarios evaluates (all relationship types and name slots). The names are shared "
        "(DeMET draws every prompt's names from one list of 30): the held-out unit is the scenario.",
        train_rows=len(data["train"]),
        train_units=len(trained),
        eval_units={"demet_mc": scenarios},
        eval_docs={"demet_mc": prompts},
        overlap=counts,
        note=note,
    )


RECIPES = (
    Recipe(
        name="demet_clp",
        trainer="clp",
        summary="Counterfactual logit pairing: the preference for a scenario's first person made the same when the "
        "names' genders are swapped (and, with both_orders, the options listed the other way round), its mean kept at "
        "the base model's.",
        source="Garg et al. 2019 (counterfactual logit pairing), on DeMET's name-swapped prompts (Levy et al. 2024, "
        "GPT-4 scenarios)",
        build=clp_data,
        eval_tasks=fixed("demet_mc"),
        datasets=("demet_gpt4", "demet"),
        chat=False,
        heldout=clp_heldout,
        limitations=(
            "Trained and judged by log-likelihood of the answers ' 1' / ' 2' (demet_mc): a generative answer "
            "(demet, with the chat template) is not trained and is reported only as a side effect where evaluated. "
            "The names are shared between training and evaluation (one list of 30); the scenarios are not."
        ),
    ),
)
