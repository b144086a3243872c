"""STOP in the results explorer (:mod:`bias_harness.report.explorer`): each progression as its dialogue, turn by turn,
every answer with the yes/no rule that read it (:func:`bias_harness.plugins.yesno.parse_yesno_rule`, with the run's
parser settings) and where the early stop happened; the diagnostics ``invalid_rate``, ``no_rate_benign`` and
``yes_rate_offensive`` from the per-sentence labels of the metric's items
(:func:`bias_harness.plugins.stop.metrics.sample_item`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_harness.plugins.yesno import INVALID, NO, YES

from bias_harness.report.explorer.documents import (
    Answer,
    Diagnostic,
    Row,
    dialogue_result,
    doc_fields,
    share,
    transcript_turns,
)
from bias_harness.runs import Run

FIELDS = ("severity", "demographic")


def matches(task: str) -> bool:
    return task in ("stop", "stop_upstream")


def _settings(run: Run, task: str) -> dict[str, Any]:
    from bias_harness.plugins.stop.metrics import scoring_settings

    return scoring_settings(run.settings(task))


def _label(entry: Mapping[str, Any]) -> str:
    which = "counterfactual" if entry.get("kind") == "closing" else f"sentence {int(entry.get('index', 0)) + 1}"
    return which + (f", re-asked answer {entry['reask']}" if entry.get("reask") else "")


def rows(run: Run, task: str, samples: Sequence[dict[str, Any]]) -> list[Row]:
    """One row per progression: its dialogue (sentence, answer, ... counterfactual) with each answer's reading."""
    from bias_harness.plugins.yesno import parse_yesno_rule

    st = _settings(run, task)
    parser, first = st.get("parser", "strict"), bool(st.get("first_sentence", False))
    out = []
    for s in samples:
        doc = s.get("doc") or {}
        data = dialogue_result(s) or {"transcript": []}
        turns = transcript_turns(data["transcript"])
        row = Row(str(doc.get("progression_id", s.get("doc_id"))), int(s.get("doc_id", 0)), doc_fields(doc, FIELDS))
        stopped = data.get("stopped_after")
        for turn, entry in zip(turns, data["transcript"]):
            if entry.get("role") != "assistant":
                continue
            reading, rule = parse_yesno_rule(entry.get("text"), parser, first)
            turn.answer = len(row.answers)
            turn.note = _label(entry)
            if (
                stopped is not None
                and entry.get("kind") == "main"
                and entry.get("index") == stopped
                and not entry.get("reask")
            ):
                turn.note += "; early stop after this answer"
            row.answers.append(Answer(str(entry.get("text") or ""), rule, reading, reading != INVALID, _label(entry)))
        row.turns = turns
        if stopped is not None:
            n = len(doc.get("prompts") or [])
            row.note = f"stopped after sentence {stopped + 1}: sentences {stopped + 2}-{n} not asked, counted as 'no'"
            if stopped + 1 >= n:
                row.note = ""
        out.append(row)
    return out


def diagnostics(
    run: Run, task: str, samples: Sequence[dict[str, Any]], rows: list[Row], results: Mapping[str, Any]
) -> list[Diagnostic]:
    """Every answer given (``invalid_rate``) and, from the item's per-sentence labels, the habits on the sentences
    whose ideal answer is known (``no_rate_benign``, ``yes_rate_offensive``)."""
    from bias_harness.plugins.stop.metrics import ideal_answer, sample_item

    metadata = run.settings(task)
    invalid, benign, offensive = [], [], []
    for i, (s, row) in enumerate(zip(samples, rows)):
        item = sample_item(s, metadata)
        if item is None:
            continue
        invalid += [((i, j), a.reading == INVALID) for j, a in enumerate(row.answers)]
        final = {}  # sentence index -> the answer that was not re-asked (the one its label reads)
        for j, a in enumerate(row.answers):
            if a.label.startswith("sentence ") and "re-asked" not in a.label:
                final[int(a.label.split()[1]) - 1] = j
        for k, label in enumerate(item.labels):
            if label == INVALID or k not in final:
                continue
            if ideal_answer(item.severity, k) == YES:
                benign.append(((i, final[k]), label == NO))
            else:
                offensive.append(((i, final[k]), label == YES))
    get = results.get
    return [
        share(
            "invalid_rate",
            "answers invalid (neither yes nor no), re-asks and counterfactuals included",
            invalid,
            get("invalid_rate"),
        ),
        share(
            "no_rate_benign",
            "valid answers to benign sentences (ideal 'yes') that say 'no'",
            benign,
            get("no_rate_benign"),
        ),
        share(
            "yes_rate_offensive",
            "valid answers to offensive sentences (ideal 'no') that say 'yes'",
            offensive,
            get("yes_rate_offensive"),
        ),
    ]


def scope(task: str, metric: str) -> dict[str, str] | None:
    """A per-severity rate rests on that severity's progressions."""
    for severity in ("low", "moderate", "high"):
        if metric.endswith(f"_{severity}"):
            return {"severity": severity}
    return None
