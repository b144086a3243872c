"""The multi-agent tasks in the results explorer (:mod:`bias_harness.report.explorer`): each (scenario, run) document
with its prompt or its conversation, agent by agent, and every task assignment read by the metric's own
:func:`bias_harness.plugins.multiagent.metrics.score_answer` (the parser rule, stereotypical / anti-stereotypical /
neutral / invalid, and the shape of a degenerate assignment); the diagnostics ``invalid_rate``, ``placeholder_rate``
and, per response kind, ``<kind>_invalid_rate`` and ``<kind>_degenerate_rate`` on exactly those answers. Detection
documents show the label read from the answer (``detect_label``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_harness.report.explorer.documents import (
    Answer,
    Diagnostic,
    Row,
    answer_text,
    dialogue_result,
    doc_fields,
    generic_rows,
    prompt_of,
    share,
    transcript_turns,
)
from bias_harness.runs import Run

FIELDS = ("domain", "run", "set", "implicit_bias", "role_only")
KINDS = {"first": "first", "reflection": "reflection", "final": "last"}  # transcript kind -> metric's response code
DEGENERATE = ("one_person", "one_gender")


def matches(task: str) -> bool:
    return task.startswith("multiagent_")


def _assignment(doc: dict[str, Any], text: str, label: str) -> Answer:
    from bias_harness.plugins.multiagent.metrics import INVALID, LABELS, score_answer

    r = score_answer(doc, text)
    reading = LABELS[r.code] + (f" ({r.shape.replace('_', ' ')})" if r.shape else "")
    return Answer(text, r.rule, reading, r.code != INVALID, label)


def _row(s: dict[str, Any]) -> Row:
    doc = s.get("doc") or {}
    key = str(doc.get("doc_key") or doc.get("id") or s.get("doc_id"))
    row = Row(key, int(s.get("doc_id", 0)), doc_fields(doc, FIELDS))
    data = dialogue_result(s)
    if data is None:  # no interaction: one assignment
        row.prompt = prompt_of(s)
        row.answers.append(_assignment(doc, answer_text(s), "answer"))
        return row
    turns = transcript_turns(data["transcript"])
    for turn, entry in zip(turns, data["transcript"]):
        kind = entry.get("kind")
        if kind in KINDS:
            turn.answer = len(row.answers)
            label = f"{KINDS[kind]} response: {turn.role}"
            row.answers.append(_assignment(doc, turn.text, label))
    row.prompt = str(doc.get("scenario_prompt") or doc.get("scenario_text") or "")
    row.turns = turns
    return row


def _detect_row(s: dict[str, Any]) -> Row:
    from bias_harness.plugins.multiagent.metrics import detect_label

    doc = s.get("doc") or {}
    text = answer_text(s)
    label = detect_label(text)
    row = Row(str(doc.get("id") or s.get("doc_id")), int(s.get("doc_id", 0)), doc_fields(doc, FIELDS), prompt_of(s))
    row.answers.append(Answer(text, "detect_label", label, label != "invalid"))
    row.note = f"gold label: {doc.get('implicit_bias')}"
    return row


def rows(run: Run, task: str, samples: Sequence[dict[str, Any]]) -> list[Row]:
    if "detect" in task:
        return [_detect_row(s) for s in samples]
    if not samples or "run_characters" not in (samples[0].get("doc") or {}):
        return generic_rows(samples)  # the School case study: prompt and answer
    return [_row(s) for s in samples]


def _code(a: Answer) -> str:
    """The metric's response code of an answer ("first response: Jack" -> first; one assignment -> all)."""
    return a.label.split(" ", 1)[0] if " response: " in a.label else "all"


def diagnostics(
    run: Run, task: str, samples: Sequence[dict[str, Any]], rows: list[Row], results: Mapping[str, Any]
) -> list[Diagnostic]:
    """Invalid and placeholder answers over every response; per response kind, invalid and degenerate ones."""
    from bias_harness.plugins.multiagent.metrics import RESPONSES

    get = results.get
    every = [((i, j), a) for i, r in enumerate(rows) for j, a in enumerate(r.answers)]
    if "detect" in task:
        invalid = [(w, not a.valid) for w, a in every]
        return [share("invalid_rate", "answers with no present/absent label", invalid, get("invalid_rate"))]
    if not rows or not any(a.rule for _, a in every):
        return []
    out = [
        share(
            "invalid_rate",
            "assignments invalid (every response)",
            [(w, not a.valid) for w, a in every],
            get("invalid_rate"),
        ),
        share(
            "placeholder_rate",
            "answers that copy a placeholder of the requested format",
            [(w, a.rule == "placeholder") for w, a in every],
            get("placeholder_rate"),
        ),
    ]
    for name, code in RESPONSES.items():
        mine = [(w, a) for w, a in every if _code(a) == code]
        if not mine:
            continue
        out.append(
            share(
                f"{name}_invalid_rate",
                f"{name.replace('_', ' ')}s invalid",
                [(w, not a.valid) for w, a in mine],
                get(f"{name}_invalid_rate"),
            )
        )
        degenerate = [
            (w, a.valid and any(d.replace("_", " ") in a.reading for d in DEGENERATE) if a.valid else None)
            for w, a in mine
        ]
        out.append(
            share(
                f"{name}_degenerate_rate",
                f"valid {name.replace('_', ' ')}s that give every task to one gender (one person included)",
                degenerate,
                get(f"{name}_degenerate_rate"),
            )
        )
    return out


# the paper's Table 1 columns (Scenarios dataset) of the response kinds of the scenario tasks
_PAPER_COLUMNS = {
    ("multiagent_nointeraction", "all_responses"): "no interaction",
    ("multiagent_interaction", "first_response"): "no goal first",
    ("multiagent_interaction", "last_response"): "no goal last",
    ("multiagent_interaction_goal", "first_response"): "goal first",
    ("multiagent_interaction_goal", "last_response"): "goal last",
}


def paper_range(task: str, metric: str) -> tuple[float, float, str] | None:
    """The range of a bias score over the paper's models (Table 1; the Scenarios tasks only: the Test set differs)."""
    from bias_harness.plugins.multiagent.report import PAPER_TABLE1

    kind = metric.removesuffix("_bias_score")
    column = _PAPER_COLUMNS.get((task, kind)) if metric.endswith("_bias_score") else None
    if column is None:
        return None
    values = [row[column] for row in PAPER_TABLE1.values()]
    return min(values), max(values), f"Borah & Mihalcea 2024, Table 1, {len(values)} models"
