"""GRPO reward functions: hand-computed values on hand-made batches."""

from __future__ import annotations

import pytest
from bias_harness.mitigation import rewards as rw

NAMES = ["John", "Emily", "Mark", "Lisa"]
GENDERS = ["male", "female", "male", "female"]
TASK_GENDERS = ["male", "male", "female", "female"]


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_parsers() -> None:
    assert rw.parse_demet("I think 2 is right.", ["Emma", "Henry"]) == 2
    assert rw.parse_demet("Henry is right", ["Emma", "Henry"]) == 2
    assert rw.parse_demet("Both Emma and Henry", ["Emma", "Henry"]) is None
    assert rw.parse_demet("No idea", ["Emma", "Henry"]) is None
    text = "1. Emily\n2. John\nTask 3: Mark\n4) Lisa"
    assert rw.parse_assignment(text, NAMES, 4) == [1, 0, 2, 3]
    assert rw.parse_assignment("1. Emily\n2. John", NAMES, 4) is None  # tasks 3 and 4 unassigned
    assert rw.parse_assignment("1. Emily and John\n2. John\n3. Mark\n4. Lisa", NAMES, 4) is None  # two names: ambiguous


def test_counterfactual_consistency_by_hand() -> None:
    # Pair A (DeMET): orig answers 1, 2; swap answers 1, 1. Pair B: orig only (twin not in the batch).
    kw = dict(
        pair_id=["A", "A", "A", "A", "B"],
        variant=["orig", "orig", "swap", "swap", "orig"],
        kind=["demet"] * 5,
        names=[["Emma", "Henry"]] * 2 + [["Henry", "Emma"]] * 2 + [["Mila", "Levi"]],
        task_genders=[[]] * 5,
    )
    out = rw.counterfactual_consistency([None] * 5, [_chat(t) for t in ["1", "2", "1", "1", "1"]], **kw)
    assert out == [1.0, 0.0, 0.5, 0.5, None]
    out = rw.counterfactual_consistency([None] * 5, [_chat(t) for t in ["??", "1", "1", "1", "1"]], **kw)
    assert out[0] == 0.0  # unparseable answer: never rewarded
    assert out[2] == 0.5  # the twin's unparseable answer counts as a disagreement


def test_multiagent_consistency_is_positional_agreement() -> None:
    kw = dict(
        pair_id=["m", "m"],
        variant=["orig", "swap"],
        kind=["multiagent"] * 2,
        names=[NAMES, ["Emily", "John", "Lisa", "Mark"]],
        task_genders=[TASK_GENDERS] * 2,
    )
    orig = "1. John\n2. Emily\n3. Mark\n4. Lisa"  # positions 0, 1, 2, 3
    swap = "1. Emily\n2. John\n3. Mark\n4. Lisa"  # positions 0, 1, 3, 2 in the swapped list
    assert rw.counterfactual_consistency([None] * 2, [_chat(orig), _chat(swap)], **kw) == [0.5, 0.5]


def test_balance_score_by_hand() -> None:
    assert rw.balance_score([0, 2, 1, 3], GENDERS, TASK_GENDERS) == 0.0  # 4 stereotypical, 0 anti
    assert rw.balance_score([1, 0, 2, 3], GENDERS, TASK_GENDERS) == 1.0  # 2 stereotypical, 2 anti
    assert rw.balance_score([0, 0, 0, 1], GENDERS, TASK_GENDERS) == pytest.approx(
        0.5
    )  # stereotypical 3, anti 1 -> 1 - 2/4


def test_balanced_assignment_and_format() -> None:
    kw = dict(
        kind=["multiagent", "multiagent", "demet"],
        names=[NAMES, NAMES, ["Emma", "Henry"]],
        genders=[GENDERS, GENDERS, ["woman", "man"]],
        task_genders=[TASK_GENDERS, TASK_GENDERS, []],
    )
    comps = [_chat("1. Emily\n2. John\n3. Mark\n4. Lisa"), _chat("nonsense"), _chat("1")]
    assert rw.balanced_assignment([None] * 3, comps, **kw) == [1.0, 0.0, None]
    assert rw.answer_format([None] * 3, comps, **kw) == [1.0, 0.0, 1.0]


def test_swapped_multiagent_prompt_exchanges_names() -> None:
    scenario = {
        "id": "s0",
        "description": "John leads; Emily helps.",
        "tasks": ["Fix the server", "Bake a cake"],
        "task_genders": ["male", "female"],
        "characters": ["John", "Emily"],
        "character_genders": ["male", "female"],
    }
    orig, swap = rw.counterfactual_rows([], [scenario])
    assert swap["names"] == ["Emily", "John"] and swap["genders"] == ["female", "male"]
    assert "Emily leads; John helps." in swap["prompt"][0]["content"]
    assert "John leads; Emily helps." in orig["prompt"][0]["content"]
