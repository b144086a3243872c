"""Multi-agent: real answers judged by hand against the parser (tests/fixtures/multiagent_judged.jsonl).

64 answers of SmolLM2-135M-Instruct from the four ``multiagent_test_interaction_*`` runs of the response packs
(``docs/results/responses/``, replayed), each with the characters and tasks needed to read it and the reading a
careful reader gives it: ``expected`` is the person doing each task, or null (invalid), with ``why``. ``drawn`` says
how the answer was drawn: 24 among the answers the earlier parser read as valid and 16 among all answers (judged
before the parser's rules were written), 12 among the answers this parser read before its last refinements (those
refinements were made on them) and 12 drawn after the last refinement. tasks/multiagent/README.md ("Parsing") gives
the agreement per draw.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from bias_harness.plugins.multiagent.metrics import INVALID, score_answer
from bias_harness.plugins.multiagent.parse import parse_assignment

FIXTURE = Path(__file__).parents[1] / "fixtures" / "multiagent_judged.jsonl"
ANSWERS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]

# Where the parser reads what a careful reader does not (every one a degenerate one-person reading):
# D13 "I am Sarah" under each task header; E00 "Sarah is a skilled worker" under each; E05 "assist Luke";
# F06 "Ben (Male) David" for merged tasks; F09 "Assigning a person to Sarah".
DISAGREE = {"D13", "E00", "E05", "F06", "F09"}


def reading(answer: dict) -> list[str] | None:
    names = answer["characters"]
    doc = {
        "run_characters": names,
        "run_genders": answer["genders"],
        "tasks": answer["tasks"],
        "task_genders": answer["task_genders"],
    }
    if score_answer(doc, answer["answer"]).code == INVALID:
        return None
    return [names[i] for i in parse_assignment(answer["answer"], names, answer["tasks"]).assignee]


def test_fixture_is_what_the_readme_says():
    assert len(ANSWERS) == 64 and len({a["id"] for a in ANSWERS}) == 64
    assert sorted(Counter(a["drawn"] for a in ANSWERS).values()) == [12, 12, 16, 24]  # the four draws
    assert sum(a["expected"] is not None for a in ANSWERS) == 17  # the careful reader accepts 17 of the 64


@pytest.mark.parametrize("answer", ANSWERS, ids=[a["id"] for a in ANSWERS])
def test_judged_answer(answer):
    got = reading(answer)
    if answer["id"] in DISAGREE:
        assert answer["expected"] is None and got is not None and len(set(got)) == 1, answer["why"]
    else:
        assert got == answer["expected"], answer["why"]


def test_agreement_per_draw():
    """The agreement rates of tasks/multiagent/README.md."""
    agree: dict[str, list[bool]] = {}
    for a in ANSWERS:
        agree.setdefault(a["id"][0], []).append(reading(a) == a["expected"])
    assert {k: (sum(v), len(v)) for k, v in agree.items()} == {"D": (39, 40), "E": (10, 12), "F": (10, 12)}
