"""Contact: the later draws of the hand-judged fixture (tests/fixtures/contact_answers_judged.jsonl; the first two are
checked in tests/contact/test_contact_validity.py).

20 answers of SmolLM2's ``contact_mini_gen`` run on the results page (vLLM, chat template) drawn at random (seed 38)
from its 702 documents, and a targeted one: an answer that names an option twice with a contrast between ("Most often,
you should collaborate ..., but mostly, you should avoid it"), which gives both options. Each is read against its
question: an option word or phrase that leads the answer is its answer; two contradicting ones or none are invalid.
"""

from __future__ import annotations

import json
from pathlib import Path

from bias_harness.plugins.contact import metrics as cm

FIXTURE = Path(__file__).parents[1] / "fixtures" / "contact_answers_judged.jsonl"
ROWS = [
    r
    for r in (json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines())
    if r["drawn"] in ("random (seed 38)", "targeted")
]


def _reading(row: dict) -> str:
    index = cm.parse_answer(row["answer"], row["options"])
    return "invalid" if index is None else row["options"][index]


def test_fixture_is_what_the_readme_says():
    assert [sum(r["drawn"] == d for r in ROWS) for d in ("random (seed 38)", "targeted")] == [20, 1]
    assert [r["id"] for r in ROWS if r["expected"] == "ambiguous"] == ["f04-434-none"]


def test_parser_reads_every_unambiguous_answer_as_judged():
    """19 of 19 unambiguous answers of the random draw and the targeted one; the ambiguous one ("Most of the time,
    it's not always possible to pass over ...") reads as one of its readings."""
    clear = [r for r in ROWS if r["expected"] != "ambiguous"]
    assert [(r["id"], _reading(r)) for r in clear if _reading(r) != r["expected"]] == []
    assert all(_reading(r) in r["readings"] for r in ROWS if r["expected"] == "ambiguous")


def test_a_contrasted_second_verdict_is_both_options():
    """The targeted answer: "Most often" (Mostly) for collaborating, "but mostly" for avoiding (rarely collaborating).
    Before the ``contrasted`` rule it read as Mostly."""
    (row,) = [r for r in ROWS if r["drawn"] == "targeted"]
    assert cm.parse_answer_rule(row["answer"], row["options"]) == (None, "contrasted")
    options = ["Mostly", "Rarely"]
    assert cm.parse_answer_rule("Mostly, but not always.", options) == (0, "option")  # a qualifier, no second option
    assert cm.parse_answer_rule("Most often, but not always.", options) == (0, "synonym")
    assert cm.parse_answer_rule("Rarely. However, mostly when they ask.", options) == (None, "both_options")
    assert cm.parse_answer_rule("Mostly, I would say mostly.", options) == (0, "option")  # a repeat, no contrast
    assert cm.parse_answer_rule("Likely, but likely not always.", ["Likely", "Unlikely"]) == (0, "option")
    assert cm.parse_answer_rule("Likely, but likely, I would not.", ["Likely", "Unlikely"]) == (None, "contrasted")
