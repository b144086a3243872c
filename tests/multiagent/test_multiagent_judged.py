"""Multi-agent: real answers judged by hand against the parser (tests/fixtures/multiagent_judged.jsonl).

98 answers of SmolLM2-135M-Instruct from the ``multiagent_test_*`` runs of the response packs
(``docs/results/responses/``, replayed), each with the characters and tasks needed to read it and the reading a
careful reader gives it: ``expected`` is the person doing each task, or null (invalid), with ``why``. ``drawn`` says
how the answer was drawn: 24 among the answers an earlier parser read as valid and 16 among all answers (judged
before the parser's rules were written), 12 among the answers the parser read before some refinements (made on
them) and 12 drawn after them (D, E, F); then, for issue 38, 20 among all 6,114 answers (G), 12 among the 31 the
revised parser read as valid (H) and 2 of the answers an earlier parser read as "every task to one person" (I).
Six answers of the first draws were re-judged (``earlier_expected``): their tasks are not the scenario's, so who does
the scenario's tasks is unknown, also when one person gets them all. tasks/multiagent/README.md ("Parsing") gives the
agreement per draw.
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

# Where the parser reads what a careful reader does not: E10 merges the scenario's four tasks into two and gives
# them all to Alex (the parser cannot match merged tasks: invalid); H00 gives task 1 to Mark, then in a second list,
# after a blank line, to Lisa (the parser reads the first list only).
DISAGREE = {"E10", "H00"}


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
    assert len(ANSWERS) == 98 and len({a["id"] for a in ANSWERS}) == 98
    assert sorted(Counter(a["drawn"] for a in ANSWERS).values()) == [2, 12, 12, 12, 16, 20, 24]  # the seven draws
    assert sum(a["expected"] is not None for a in ANSWERS) == 21  # the careful reader accepts 21 of the 98
    assert sorted(a["id"] for a in ANSWERS if "earlier_expected" in a) == ["D35", "E02", "E11", "F04", "F08", "F10"]


@pytest.mark.parametrize("answer", ANSWERS, ids=[a["id"] for a in ANSWERS])
def test_judged_answer(answer):
    got = reading(answer)
    if answer["id"] in DISAGREE:
        assert got != answer["expected"], answer["why"]
    else:
        assert got == answer["expected"], answer["why"]


def test_agreement_per_draw():
    """The agreement rates of tasks/multiagent/README.md."""
    agree: dict[str, list[bool]] = {}
    for a in ANSWERS:
        agree.setdefault(a["id"][0], []).append(reading(a) == a["expected"])
    assert {k: (sum(v), len(v)) for k, v in agree.items()} == {
        "D": (40, 40),
        "E": (11, 12),
        "F": (12, 12),
        "G": (20, 20),
        "H": (11, 12),
        "I": (2, 2),
    }


def test_reward_reads_as_the_evaluation():
    """The GRPO reward (mitigation/rewards.py, through plugins/multiagent/counterfactual.py) reads every judged answer
    as the evaluation does: the positions of a valid, non-degenerate assignment; None where the evaluation reads it
    as invalid or as every task to one person / one gender (set aside by the verdicts)."""
    from bias_harness.plugins.multiagent.counterfactual import read
    from bias_harness.plugins.multiagent.metrics import DEGENERATE, NOTES

    read_some = 0
    for a in ANSWERS:
        row = {"names": a["characters"], **{k: a[k] for k in ("genders", "tasks", "task_genders")}}
        doc = {"run_characters": a["characters"], "run_genders": a["genders"], "tasks": a["tasks"]}
        evaluation = score_answer({**doc, "task_genders": a["task_genders"]}, a["answer"])
        positions = parse_assignment(a["answer"], a["characters"], a["tasks"]).assignee
        degenerate = evaluation.shape in {NOTES[d] for d in DEGENERATE}
        expected = None if evaluation.code == INVALID or degenerate else tuple(positions)
        assert read(a["answer"], row) == expected, a["id"]
        read_some += expected is not None
    assert read_some == 14  # of the 21 answers the evaluation reads as valid, 7 are degenerate


DETECT = [
    json.loads(line)
    for line in (FIXTURE.parent / "multiagent_detect_judged.jsonl").read_text(encoding="utf-8").splitlines()
]


def test_detection_answers_judged_by_hand():
    """``multiagent_detect`` (tests/fixtures/multiagent_detect_judged.jsonl): 20 answers drawn at random (seed 38) from
    the 86 of the results page's run, all asserting a bias, and every answer of the run that mentions bias without
    asserting it (5; one of them, "presents a complex and nuanced issue of implicit bias", ambiguous). The parser reads
    every unambiguous one as the reader does; the earlier rule (any mention of bias not denied = present) read the
    four unasserted ones as "present"."""
    from bias_harness.datasets_src.multiagent.builder import label_from_explanation
    from bias_harness.plugins.multiagent.metrics import detect_label

    assert Counter(a["drawn"].split(" ")[0] for a in DETECT) == {"random": 20, "targeted:": 5}
    clear = [a for a in DETECT if a["expected"] != "ambiguous"]
    assert [a["id"] for a in clear if detect_label(a["answer"]) != a["expected"]] == []
    assert all(detect_label(a["answer"]) in a["readings"] for a in DETECT if a["expected"] == "ambiguous")
    earlier = [a for a in clear if label_from_explanation(a["answer"]) != a["expected"]]  # its fallback for these
    assert len(earlier) == 4 and all(a["expected"] == "invalid" for a in earlier)
