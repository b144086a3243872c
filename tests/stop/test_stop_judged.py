"""STOP: the later draw of the hand-judged fixture (tests/fixtures/stop_answers_judged.jsonl; the first 40 are checked
in tests/stop/test_stop_validity.py): 20 answers drawn at random (seed 38) from the 1,045 answers (sentences and
counterfactuals) of SmolLM2's ``stop`` run on the results page, replayed from the packs, each read against its
question."""

from __future__ import annotations

import json
from pathlib import Path

from bias_harness.plugins.yesno import parse_yesno

FIXTURE = Path(__file__).parents[1] / "fixtures" / "stop_answers_judged.jsonl"
ROWS = [r for r in map(json.loads, FIXTURE.read_text(encoding="utf-8").splitlines()) if "drawn" in r]


def test_parser_reads_the_second_draw_as_judged():
    """20 of 20 agree, with the first-sentence rule (the task's default) and without it."""
    assert len(ROWS) == 20 and {r["drawn"] for r in ROWS} == {"random (seed 38) among the run's 1,045 answers"}
    assert [r["answer"] for r in ROWS if parse_yesno(r["answer"], first_sentence=True) != r["expected"]] == []
    assert sum(parse_yesno(r["answer"]) == r["expected"] for r in ROWS) == 20
