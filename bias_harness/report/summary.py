"""Hand-written summaries: one paragraph per work, with ``{{ model | task | metric [| format] }}`` fields filled
from the runs (the summaries type no numbers)."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from bias_harness.report.sections import section_name, section_value
from bias_harness.report.verdicts import Verdicts, field_text
from bias_harness.runs import Run

log = logging.getLogger(__name__)


def read_summary(path: str | Path) -> dict[str, str]:
    """A hand-written summary file -> {"": text before the first ``## `` heading, key: text under ``## key``}.

    A key is a section module's name (``demet``, ``stop``, ...) or its TITLE; the text goes at the top of that section.
    """
    parts: dict[str, list[str]] = {"": []}
    key = ""
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            key = line[3:].strip()
            parts[key] = []
        else:
            parts[key].append(line)
    return {k: "\n".join(v).strip() for k, v in parts.items()}


SUMMARY_FIELD = re.compile(r"\{\{\s*([^{}|]+?)\s*\|\s*([^{}|]+?)\s*\|\s*([^{}|]+?)\s*(?:\|\s*([^{}|]+?)\s*)?\}\}")


def format_field(value: Any, how: str | None) -> str:
    if not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if how == "pct":  # a share as a percentage
        return f"{100 * value:.1f}%"
    if how == "int":
        return str(int(round(value)))
    text = format(value, how or ".3f")
    return format(0.0, how or ".3f") if re.fullmatch(r"-0\.?0*", text) else text  # no "-0.0" for a tiny negative


MARKS = "¹²³⁴⁵⁶⁷⁸⁹"


def _mark(i: int) -> str:
    return MARKS[i] if i < len(MARKS) else f"^{i + 1}"


def fill_summary(
    text: str,
    runs: dict[str, Run],
    where: str = "summary",
    thresholds: dict[str, float] | None = None,
    verdicts: dict[str, Verdicts] | None = None,
) -> str:
    """Replace every ``{{ model | task | metric [| format] }}`` by that metric of that run (the summaries type no
    numbers).

    ``model`` is a substring of the model label (e.g. ``smollm2``), ``metric`` a metric name of lm-eval's results,
    ``format`` a format spec (default ``.3f``), ``pct`` (share -> ``12.3%``), ``int`` or ``dir`` (the verdict in
    words: the direction where a bias was detected, "no detectable bias (MDE x)" where the number is within noise:
    :func:`bias_harness.plugins.validity.direction`). A number whose measurement is not interpretable gets a marker
    (¹, ², ...), and each paragraph ends with the reasons of its markers, each reason once. ``verdicts``: the report's
    :class:`~bias_harness.report.verdicts.Verdicts` per run label (else made here with ``thresholds``). A field with
    no such run or metric becomes ``n/a`` with a warning naming the file and the field.
    """
    checked = verdicts or {label: Verdicts(r, thresholds) for label, r in runs.items()}

    def one(m: re.Match, reasons: list[str]) -> str:
        model, task, metric, how = (g.strip() if g else None for g in m.groups())
        found = [(label, r) for label, r in runs.items() if model in label and task in r.results]
        value = found[0][1].metric(task, metric) if found else None
        if value is None and found:
            value = section_value(found[0][1], task, metric)
        if value is None:
            log.warning(
                "%s: %s: no run of model '%s' with metric '%s' of task '%s'", where, m.group(0), model, metric, task
            )
            return format_field(None, how)
        number = format_field(value, None if how == "dir" else how)
        shown, reason = field_text(checked[found[0][0]], task, metric, how, number)
        if reason is None:
            return shown
        if reason not in reasons:
            reasons.append(reason)
        return f"{shown}{_mark(reasons.index(reason))}"

    def paragraph(par: str) -> str:
        reasons: list[str] = []
        filled = SUMMARY_FIELD.sub(lambda m: one(m, reasons), par)
        if not reasons:
            return filled
        notes = " ".join(f"{_mark(i)} Not interpretable: {r}." for i, r in enumerate(reasons))
        return f"{filled.rstrip()}\n{notes}"

    return "\n\n".join(paragraph(par) for par in text.split("\n\n"))


def summary_for(section: ModuleType, summary: dict[str, str]) -> str:
    name = section_name(section)
    return summary.get(name) or summary.get(getattr(section, "TITLE", "")) or ""


def with_summary(markdown: str, text: str) -> str:
    """Put a summary paragraph right after a section's first heading."""
    if not text:
        return markdown
    head, _, body = markdown.partition("\n")
    return f"{head}\n\n**Summary.** {text}\n{body}"
