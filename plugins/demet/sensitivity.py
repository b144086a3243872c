"""Parser sensitivity of a DeMET generation task: its headline numbers under each reading of an ambiguous answer.

A bare "1. NAME" has two readings (:data:`bias_harness.plugins.demet.parse.READINGS`): the headline's (an echo of
the option list, invalid) and ``list_prefix`` ("1." is the model's list prefix, the name is the vote). The report
shows, per generation task, the valid answers, the first-option share, the three pair biases and Eq. 2 under each
reading, each with its verdict. The headline reading's come from the report's
:class:`~bias_harness.report.verdicts.Verdicts` (the same verdicts as every other table). The other reading's: the
logged answers (``resps``) read again with that reading, aggregated with the task's own metric functions and settings
(:func:`~bias_harness.plugins.demet.metrics.results_for`, :func:`~bias_harness.plugins.demet.metrics.aggregate`), and
judged by :func:`bias_harness.plugins.validity.verdict` with the report's thresholds. ``demet_reask`` is left out
(which attempts it made depended on the reading), and so are the log-likelihood tasks (no text).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from bias_harness.plugins.demet import metrics as dm
from bias_harness.plugins.demet.parse import HEADLINE, READINGS, parse

from bias_harness.runs import Run, fmt

PAIRS = dm.PAIRS
ROWS = (
    ("n_valid", "valid answers"),
    ("first_option_rate", "first-option share"),
    *((f"pair_bias_{p}", "B({}, {})".format(*p.split("_"))) for p in PAIRS),
    ("mixed_gender_bias", "Eq. 2 (mixed_gender_bias)"),
)


class ReadingResults(Mapping[str, Any]):
    """A task's metrics under one reading, each aggregated on first use from the items of the re-read answers."""

    def __init__(self, items: dict[str, list[Any]], settings: dict[str, Any]) -> None:
        self.items, self.settings = items, settings
        self.values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.items:
            raise KeyError(name)
        if name not in self.values:
            self.values[name] = dm.aggregate(name, self.items[name], settings=self.settings)
        return self.values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def answers(run: Run, task: str) -> list[tuple[dict[str, Any], str]]:
    """(doc, raw answer) of every logged pair sample of a generation task (none for log-likelihood tasks and
    ``demet_reask``)."""
    out = []
    for s in run.samples(task):
        doc, resp = s.get("doc", {}), s.get("resps") or []
        if "name1" not in doc or "relationship" not in doc or not resp or not isinstance(resp[0], list):
            continue
        text = resp[0][0] if resp[0] else None
        if not isinstance(text, str) or (text.startswith("{") and '"attempts"' in text):
            return []
        out.append((doc, text))
    return out


def reading_items(pairs: Sequence[tuple[dict[str, Any], str]], reading: str) -> dict[str, list[Any]]:
    """metric key -> the items ``process_results`` gives the answers read under ``reading``."""
    levels = dm.ET_GPT4 if any(d.get("et") == "other" for d, _ in pairs) else dm.ET_HUMAN
    items: dict[str, list[Any]] = defaultdict(list)
    for doc, text in pairs:
        index = parse(text, doc, reading).index
        choice = (dm.NAME1, dm.NAME2)[index] if index is not None else dm.INVALID
        for key, item in dm.results_for(doc, choice, levels).items():
            items[key].append(item)
    return dict(items)


def reading_results(run: Run, task: str, reading: str) -> ReadingResults:
    """The metrics of ``task`` under ``reading``, with the run's own settings of the task (McNemar variant,
    bootstrap and permutation draws and seeds)."""
    return ReadingResults(reading_items(answers(run, task), reading), dm.settings_of(run.settings(task)))


def _cell(value: Any, verdict: Any, metric: str) -> str:
    shown = fmt(value, 0) if metric == "n_valid" else fmt(value)
    return shown if verdict is None else f"{shown}: {verdict.text()}"


def lines(run: Run, task: str, verdicts: Any) -> list[str]:
    """The "parser sensitivity" table of ``task`` (none where the task has no logged generated answers)."""
    from bias_harness.plugins.validity import verdict

    pairs = answers(run, task)
    if not pairs:
        return []
    th = verdicts.thresholds(task)
    columns: dict[str, tuple[Mapping[str, Any], Any]] = {
        HEADLINE: (verdicts.results(task), lambda m: verdicts.verdict(task, m))
    }
    for reading in READINGS:
        if reading != HEADLINE:
            res = ReadingResults(reading_items(pairs, reading), dm.settings_of(run.settings(task)))
            columns[reading] = (res, lambda m, res=res: verdict(task, m, res, th))
    out = [
        'Parser sensitivity: a bare "1. NAME" (the whole answer) has two readings (tasks/demet/README.md, "Answer '
        f"parsing\"): `{HEADLINE}` (the headline: the option list's first line copied, or a digit its name "
        'contradicts: invalid) and `list_prefix` ("1." is the model\'s list prefix, the name is the vote). Each '
        "number under each reading, with its verdict (same thresholds).",
        "",
        "| number | " + " | ".join(f"`{r}`" + (" (headline)" if r == HEADLINE else "") for r in columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for metric, label in ROWS:
        cells = [_cell(res.get(metric), v(metric), metric) for res, v in columns.values()]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out + [""]
