"""DeMET in the results explorer (:mod:`bias_harness.report.explorer`): per logged prompt its scenario fields, the
answer, the parser rule that read it (:func:`bias_harness.plugins.demet.parse.parse`, the choice filter's rules) and
the choice the metrics counted; the diagnostics ``invalid_rate`` and ``first_option_rate`` from the metrics' own
per-document items (:func:`bias_harness.plugins.demet.metrics.sample_results`); the paper's range of Eq. 2 (Tables 3
and 10)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bias_harness.plugins.answer_filters import VALID_RULES

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

FIELDS = ("topic", "et", "relationship", "name1", "name2", "slot", "name", "list")


def matches(task: str) -> bool:
    return task == "demet" or task.startswith("demet_")


def _reading(choice: str, doc: Mapping[str, Any]) -> str:
    """NAME1 / NAME2 as the metrics count it (the names are the row's fields); anything else is invalid."""
    from bias_harness.plugins.demet.metrics import NAME1, NAME2

    return choice if choice in (NAME1, NAME2) else "invalid"


def _answers(sample: dict[str, Any]) -> list[Answer]:
    from bias_harness.plugins.demet.parse import parse

    doc = sample.get("doc") or {}
    filtered = sample.get("filtered_resps") or []
    if "relationship" not in doc:  # demet_names: the filtered answer (female / male / [invalid])
        reading = str(filtered[0]) if filtered else ""
        return [Answer(answer_text(sample), "choice filter", reading, reading in ("female", "male"))]
    if filtered and not isinstance(filtered[0], str):  # demet_mc: the more likely of " 1" / " 2"
        from bias_harness.plugins.demet.metrics import mc_choice

        lls = loglikelihoods(sample)
        text = "; ".join(f"{c.strip()!r}: {ll:.3f}" for c, ll in zip(continuations(sample), lls))
        choice = mc_choice(filtered)
        return [Answer(text, "higher log-likelihood", _reading(choice, doc), choice != "[invalid]")]
    text = answer_text(sample)
    if text.startswith("{") and '"attempts"' in text:  # demet_reask: every attempt, as its dialogue logged it
        data = json.loads(text)
        return [
            Answer(
                str(a.get("answer", "")),
                str(a.get("rule", "")),
                _reading(str(a.get("choice")), doc),
                a.get("rule") in VALID_RULES,
                f"attempt {a.get('attempt')}: {a.get('wording')}",
            )
            for a in data.get("attempts", [])
        ]
    rule = parse(text, doc).rule
    choice = str(filtered[0]) if filtered else ""
    return [Answer(text, rule, _reading(choice, doc), rule in VALID_RULES)]


def rows(run: Run, task: str, samples: Sequence[dict[str, Any]]) -> list[Row]:
    """One row per logged prompt."""
    out = []
    for s in samples:
        doc = s.get("doc") or {}
        fields = doc_fields(doc, FIELDS)
        if "et" in fields:
            fields["scenario type"] = fields.pop("et")
        key = str(doc.get("prompt_id") or f"{doc.get('name', '')}#{s.get('doc_id')}")
        out.append(Row(key, int(s.get("doc_id", 0)), fields, prompt_of(s), answers=_answers(s)))
    return out


def _final(answers: list[Answer]) -> int:
    """The answer the metrics counted: the last attempt of demet_reask, else the only one."""
    return len(answers) - 1


def diagnostics(
    run: Run, task: str, samples: Sequence[dict[str, Any]], rows: list[Row], results: Mapping[str, Any]
) -> list[Diagnostic]:
    """``invalid_rate`` and ``first_option_rate`` (pair tasks), each from the metric's own per-document items."""
    from bias_harness.plugins.demet.metrics import ET_GPT4, ET_HUMAN, process_results_names, sample_results

    levels = ET_GPT4 if any((s.get("doc") or {}).get("et") == "other" for s in samples) else ET_HUMAN
    invalid, first = [], []
    for i, (s, row) in enumerate(zip(samples, rows)):
        doc, resp = s.get("doc") or {}, s.get("filtered_resps")
        if not resp:
            continue
        where = (i, _final(row.answers))
        if "relationship" in doc:
            items = sample_results(doc, resp, levels)
            invalid.append((where, items["invalid_rate"]))
            first.append((where, items["first_option_rate"]))
        elif "name" in doc:
            invalid.append((where, process_results_names(doc, [resp[0]])["invalid_rate"]))
    out = [share("invalid_rate", "answers invalid (no single name chosen)", invalid, _get(results, "invalid_rate"))]
    if first:
        label = "valid answers that pick the first-listed option (NAME1)"
        out.append(share("first_option_rate", label, first, _get(results, "first_option_rate")))
    return out


def _get(results: Mapping[str, Any], name: str) -> Any:
    try:
        return results[name]
    except KeyError:
        return None


_SCORE_SCOPE = "score_"


def scope(task: str, metric: str) -> dict[str, str] | None:
    """The documents behind a score per relationship type are that type's; every other number rests on them all."""
    if metric.startswith(_SCORE_SCOPE):
        return {"relationship": metric[len(_SCORE_SCOPE) :]}
    return None


def paper_range(task: str, metric: str) -> tuple[float, float, str] | None:
    """The range of Eq. 2 over the paper's models (Table 3; Table 10 for ``demet_gpt4``)."""
    from bias_harness.plugins.demet.report import PAPER_TABLE3, PAPER_TABLE10

    if metric != "mixed_gender_bias" or task in ("demet_names",):
        return None
    table, name = (PAPER_TABLE10, "Table 10") if task == "demet_gpt4" else (PAPER_TABLE3, "Table 3")
    values = [row[0] for row in table.values()]
    return min(values), max(values), f"Levy et al. 2024, {name}, {len(values)} models"
