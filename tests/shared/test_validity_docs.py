"""The interpretability docs say what the code does: docs/validity.md lists every threshold with its default, and the
results summary (docs/results/summary.md) states a direction of bias only through a summary field, which renders it
only where the number's verdict passed (``{{ model | task | metric | dir }}``, bias_harness/report/verdicts.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bias_harness.plugins.validity import DEFAULT_THRESHOLDS

from bias_harness.report import SUMMARY_FIELD, read_summary

ROOT = Path(__file__).resolve().parents[2]

# Words and phrases that say which way a number leans. A sentence may define a category ("stereotypically male
# tasks") or describe a rule; it may not state which way a measured number goes except through a field.
DIRECTION = re.compile(
    r"\b(?:anti-)?stereotypical\b|\blean(?:s|ed|ing)?\b|\bfavou?r(?:s|ed|ing)?\b|\bprefer(?:s|red|ring)?\b"
    r"|\bpreference for\b|\bpicks? the (?:first|second)\b|\b(?:towards?|against) the stereotype\b"
    r"|\bbiased (?:towards?|against|in favou?r)\b|\b(?:more|less) biased\b|\b(?:opposite|same) direction\b",
    re.IGNORECASE,
)
SECTIONS = read_summary(ROOT / "docs" / "results" / "summary.md")


def directions(text: str) -> list[str]:
    """The direction words of ``text`` outside its summary fields."""
    return [m.group(0) for m in DIRECTION.finditer(SUMMARY_FIELD.sub(" ", text))]


def test_the_word_list_catches_what_it_should():
    assert directions("the last assignments that do parse lean strongly anti-stereotypical") == [
        "lean",
        "anti-stereotypical",
    ]
    assert directions("both above 50 (a preference for the stereotype)") == ["preference for"]
    assert directions("it picks the second option for every prompt; the opposite direction of the hypothesis") == [
        "picks the second",
        "opposite direction",
    ]
    assert directions("direction: {{ smollm2 | t | all_responses_bias_score | dir }}; stereotypically male tasks") == []


@pytest.mark.parametrize(
    "section",
    list(SECTIONS),
)
def test_summary_states_directions_only_through_fields(section):
    assert directions(SECTIONS[section]) == [], section or "(text before the first section)"


def test_docs_list_every_threshold_with_its_default():
    text = (ROOT / "docs" / "validity.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([\d.]+) \|", text, re.MULTILINE))
    assert {name: float(value) for name, value in rows.items()} == DEFAULT_THRESHOLDS
