"""What the explorer shows per document: :class:`Row` (one logged document, its subgroup fields, its prompt or
dialogue, and each answer with the parser rule that read it), :class:`Diagnostic` (the answers a diagnostic counts),
and the helpers every work's ``plugins/<work>/explore.py`` builds them with (:func:`prompt_of`, :func:`answer_text`,
:func:`transcript_turns`, :func:`generic_rows`). Light on purpose: a work's module imports it without the report."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Answer:
    """One answer of a document: its raw ``text``, the parser ``rule`` that decided it, what that rule read it as
    (``reading``: the chosen option, "yes", "stereotypical", ...), whether it counts (``valid``; None: the work reads
    no validity, e.g. a log-likelihood choice) and, for a document with several answers, which one (``label``)."""

    text: str
    rule: str = ""
    reading: str = ""
    valid: bool | None = None
    label: str = ""


@dataclass
class Turn:
    """One message of a dialogue: who speaks (``role``: user, assistant or an agent's name), the ``text``, a ``note``
    (e.g. "early stop after this answer") and the index of the :class:`Answer` it is, where it is one."""

    role: str
    text: str
    note: str = ""
    answer: int | None = None


@dataclass
class Row:
    """One document of a task as the run logged it: ``key`` (unique in the task; the same document of two runs has
    the same key), lm-eval's ``doc_id``, the subgroup ``fields`` (topic, scenario type, severity, axis ...), the
    ``prompt`` as sent (single turn) or the dialogue's ``turns``, its ``answers`` and a ``note``."""

    key: str
    doc_id: int
    fields: dict[str, str] = field(default_factory=dict)
    prompt: str = ""
    turns: list[Turn] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    note: str = ""


@dataclass
class Diagnostic:
    """An answer-validity diagnostic (a metric of the task) and exactly the answers it counts: ``counted`` (the
    numerator) out of ``base`` (the denominator), each a list of (row index, answer index). ``value`` is what the run
    reports; ``len(counted) / len(base)`` equals it for a share."""

    metric: str
    label: str
    counted: list[tuple[int, int]]
    base: list[tuple[int, int]]
    value: float | None = None


def prompt_of(sample: dict[str, Any]) -> str:
    """The prompt the model saw: the context of the sample's first request (lm-eval logs every request's arguments;
    log-likelihood options share one context)."""
    args = sample.get("arguments") or {}
    first = next(iter(args.values()), None) if isinstance(args, dict) else (args[0] if args else None)
    if isinstance(first, dict):
        first = first.get("arg_0")
    elif isinstance(first, (list, tuple)) and first:
        first = first[0]
    return first if isinstance(first, str) else json.dumps(first, ensure_ascii=False, default=str)


def continuations(sample: dict[str, Any]) -> list[str]:
    """The continuations a log-likelihood sample scored (one per option), in request order."""
    args = sample.get("arguments") or {}
    values = args.values() if isinstance(args, dict) else args
    out = []
    for a in values:
        second = a.get("arg_1") if isinstance(a, dict) else (a[1] if len(a) > 1 else None)
        out.append(second if isinstance(second, str) else "")
    return out


def loglikelihoods(sample: dict[str, Any]) -> list[float]:
    """The log-likelihood of each option of a log-likelihood sample (``filtered_resps``: [loglik, is_greedy])."""
    out = []
    for r in sample.get("filtered_resps") or []:
        value = r[0] if isinstance(r, (list, tuple)) else r
        try:
            out.append(float(value))
        except (TypeError, ValueError):
            out.append(float("nan"))
    return out


def answer_text(sample: dict[str, Any]) -> str:
    """The generated text of a generation sample (its first response, before any filter)."""
    resps = sample.get("resps") or []
    first = resps[0] if resps else ""
    while isinstance(first, list):
        first = first[0] if first else ""
    return first if isinstance(first, str) else str(first)


def dialogue_result(sample: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON result a multi-turn dialogue logged as its response (:mod:`bias_harness.plugins.multiturn`), or None."""
    text = answer_text(sample)
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("transcript"), list) else None


def transcript_turns(transcript: Iterable[dict[str, Any]]) -> list[Turn]:
    """A dialogue's transcript (``{"speaker"/"role", "text", ...}`` per message) as turns; the speaker is the agent's
    name where the dialogue has agents, else the role."""
    turns = []
    for entry in transcript:
        speaker = entry.get("speaker")
        role = entry.get("role") or ""
        who = speaker if speaker not in (None, "model", "user") else (role or str(speaker or ""))
        kind = entry.get("kind")
        note = f"{kind}, round {entry['round']}" if kind and entry.get("agent") is not None else ""
        turns.append(Turn(str(who), str(entry.get("text") or ""), note))
    return turns


def doc_fields(doc: dict[str, Any], names: Sequence[str]) -> dict[str, str]:
    """The subgroup fields ``names`` of a document that it has, as strings (lists joined)."""
    out = {}
    for name in names:
        value = doc.get(name)
        if value is None or value == "":
            continue
        out[name] = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return out


def generic_rows(samples: Sequence[dict[str, Any]]) -> list[Row]:
    """Rows of a task no work's explore module claims: the prompt, the answer (or the option with the highest
    log-likelihood) and the doc's short scalar fields; no parser rule."""
    rows = []
    for s in samples:
        doc = s.get("doc") or {}
        fields = {
            k: str(v) for k, v in doc.items() if isinstance(v, (str, int, bool)) and len(str(v)) <= 40 and k != "id"
        }
        dialogue = dialogue_result(s)
        lls = loglikelihoods(s) if s.get("filtered_resps") and isinstance(s["filtered_resps"][0], list) else []
        if dialogue is not None:
            row = Row(
                str(s.get("doc_id")), int(s.get("doc_id", 0)), fields, turns=transcript_turns(dialogue["transcript"])
            )
        elif lls:
            options = continuations(s)
            best = max(range(len(lls)), key=lambda i: lls[i])
            text = "; ".join(f"{o.strip()!r}: {ll:.2f}" for o, ll in zip(options, lls))
            row = Row(str(s.get("doc_id")), int(s.get("doc_id", 0)), fields, prompt_of(s))
            row.answers.append(Answer(text, "highest log-likelihood", options[best].strip() if options else str(best)))
        else:
            filtered = s.get("filtered_resps") or [""]
            row = Row(str(s.get("doc_id")), int(s.get("doc_id", 0)), fields, prompt_of(s))
            row.answers.append(Answer(answer_text(s), "", str(filtered[0])))
        rows.append(row)
    return rows


def share(
    metric: str, label: str, flags: Iterable[tuple[tuple[int, int], bool | float | None]], value: Any = None
) -> Diagnostic:
    """A diagnostic that is a share of answers, from the per-answer items the metric averages: ``flags`` are
    ((row, answer), item) pairs, item 1/True (counted), 0/False (in the base only) or None (not in the base)."""
    counted, base = [], []
    for where, flag in flags:
        if flag is None:
            continue
        base.append(where)
        if flag:
            counted.append(where)
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return Diagnostic(metric, label, counted, base, number)
