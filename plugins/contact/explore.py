"""The Contact Hypothesis tasks in the results explorer (:mod:`bias_harness.report.explorer`): per prompt its cell
(scale, contact type, action, axis, descriptor ...), the answer (generation: the text, read by
:func:`bias_harness.plugins.contact.metrics.parse_answer_rule`; log-likelihood: each option's normalised score) and
the option the metric counted, from the item the run logged; the diagnostics ``invalid_rate`` and
``same_answer_rate`` (the action pairs answered with the same option) on exactly those answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_harness.report.explorer.documents import (
    Answer,
    Diagnostic,
    Row,
    answer_text,
    continuations,
    doc_fields,
    loglikelihoods,
    prompt_of,
    share,
)
from bias_harness.runs import Run

FIELDS = (
    "scale",
    "contact_type",
    "action_type",
    "axis",
    "bucket",
    "descriptor",
    "principle",
    "scenario",
    "template_id",
)


def matches(task: str) -> bool:
    return task.startswith("contact_") or task == "scd_heldout"


def _item(sample: dict[str, Any]) -> list[Any] | None:
    """The metric's item of the sample (every key of a Contact task gets the same one): (prompt set, contact type,
    biased 1/0/-1 invalid, scale, action pair, option index or -1)."""
    item = sample.get("invalid_rate")
    return item if isinstance(item, list) and len(item) >= 3 else None


def _answer(sample: dict[str, Any], item: list[Any] | None) -> Answer:
    from bias_harness.plugins.contact.metrics import parse_answer_rule

    doc = sample.get("doc") or {}
    options = list(doc.get("options") or [])
    chosen = item[5] if item and len(item) > 5 else None
    biased = item[2] if item else None
    reading = (
        "invalid"
        if biased == -1
        else str(options[chosen])
        if isinstance(chosen, int) and 0 <= chosen < len(options)
        else ""
    )
    if reading and biased == 1:
        reading += " (biased option)"
    filtered = sample.get("filtered_resps") or []
    if filtered and not isinstance(filtered[0], str):  # log-likelihood: each option, normalised as the metric does
        norm = doc.get("option_norm") or [1.0] * len(filtered)
        lls = loglikelihoods(sample)
        text = "; ".join(
            f"{c.strip()!r}: {ll:.3f}" + (f" / {n:g} = {ll / n:.3f}" if n != 1 else "")
            for c, ll, n in zip(continuations(sample), lls, norm)
        )
        return Answer(text, f"higher log-likelihood (normalised: {doc.get('option_norm_rule', 'none')})", reading, True)
    text = answer_text(sample)
    _, rule = parse_answer_rule(text, options)
    return Answer(text, rule, reading, biased != -1)


def rows(run: Run, task: str, samples: Sequence[dict[str, Any]]) -> list[Row]:
    out = []
    for s in samples:
        doc = s.get("doc") or {}
        row = Row(str(doc.get("id") or s.get("doc_id")), int(s.get("doc_id", 0)), doc_fields(doc, FIELDS), prompt_of(s))
        row.answers.append(_answer(s, _item(s)))
        out.append(row)
    return out


def diagnostics(
    run: Run, task: str, samples: Sequence[dict[str, Any]], rows: list[Row], results: Mapping[str, Any]
) -> list[Diagnostic]:
    """``invalid_rate`` and ``same_answer_rate`` from the logged items (:func:`.metrics.same_answer_rate`'s pairs)."""
    items = [_item(s) for s in samples]
    get = results.get
    invalid = [((i, 0), it[2] < 0) for i, it in enumerate(items) if it]
    pairs: dict[str, list[tuple[int, int]]] = {}  # action pair -> (row, option) of its valid answers
    for i, it in enumerate(items):
        if it and len(it) > 5 and it[4] is not None and it[5] >= 0:
            pairs.setdefault(it[4], []).append((i, it[5]))
    same = [((i, 0), a[1] == b[1]) for a, b in (p for p in pairs.values() if len(p) == 2) for i, _ in (a, b)]
    return [
        share(
            "invalid_rate",
            "answers invalid (no option, both options or only the question echoed)",
            invalid,
            get("invalid_rate"),
        ),
        share(
            "same_answer_rate",
            "answers in action pairs (inclusive and avoidance question) answered with the same option",
            same,
            get("same_answer_rate"),
        ),
    ]


def scope(task: str, metric: str) -> dict[str, str] | None:
    """A bias % per contact type rests on that contact type's prompts."""
    for contact in ("none", "positive", "negative"):
        if metric == f"bias_pct_{contact}":
            return {"contact_type": contact}
    return None


def paper_range(task: str, metric: str) -> tuple[float, float, str] | None:
    """The range of a bias % per contact type over the paper's models (Raj et al. 2024, Table 1), on the task's scale
    (every scale for the mixed ``contact_mini`` tasks)."""
    from bias_harness.plugins.contact.report import PAPER_TABLE1

    contacts = ("none", "positive", "negative")
    if not metric.startswith("bias_pct_") or metric.removeprefix("bias_pct_") not in contacts:
        return None
    column = contacts.index(metric.removeprefix("bias_pct_"))
    scale = next((s for s in ("certainty", "likelihood", "frequency") if s in task), None)
    values = [row[column] for (_, sc), row in PAPER_TABLE1.items() if scale in (None, sc)]
    where = f"{scale} scale" if scale else "every scale"
    return (
        (min(values), max(values), f"Raj et al. 2024, Table 1, {len(values)} model rows, {where}") if values else None
    )
