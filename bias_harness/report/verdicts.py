"""The report's side of the interpretability verdicts (:mod:`bias_harness.plugins.validity`), for every work alike.

* :class:`TaskResults`: one task's results with plain metric names; a metric lm-eval did not aggregate (a breakdown
  of a run without ``--metadata '{"breakdown": true}'``) is computed on first use by the task's report section
  (``metric_value``), from the logged samples, as the section's tables show it;
* :func:`task_thresholds`: the documented thresholds, the task's ``metadata.validity`` (from the run's task
  config) and the caller's overrides (``bias-harness report --threshold NAME=VALUE``);
* :func:`markdown`: per task, the verdict on each headline metric that has one (metric, value, verdict and why);
* :func:`field_text`: a summary field: the number, followed by "(not interpretable: ...)" where its verdict failed;
  format ``dir``: the metric's direction in words (:func:`bias_harness.plugins.validity.direction`).

A work takes part by writing ``plugins/<work>/validity.py``; nothing here names a work.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from bias_harness.plugins import validity
from bias_harness.report.sections import section_value
from bias_harness.runs import Run, fmt


class TaskResults(Mapping[str, Any]):
    """``run``'s results of ``task`` (plain names; the first filter's value), completed on demand by the task's
    report section. Iteration yields the metrics lm-eval aggregated."""

    def __init__(self, run: Run, task: str) -> None:
        self.run, self.task = run, task
        self.base = dict(validity.plain_results(run.results.get(task, {})))
        self.computed: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self.base:
            return self.base[name]
        if name not in self.computed:
            self.computed[name] = section_value(self.run, self.task, name)
        if self.computed[name] is None:
            raise KeyError(name)
        return self.computed[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


def parse_thresholds(pairs: list[str] | None) -> dict[str, float]:
    """``["min_valid=50", ...]`` -> ``{"min_valid": 50.0}``; a bad pair or an unknown name fails, naming it."""
    from bias_harness.errors import BadInput

    out: dict[str, float] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or name.strip() not in validity.DEFAULT_THRESHOLDS:
            known = ", ".join(validity.DEFAULT_THRESHOLDS)
            raise BadInput(f"--threshold {pair!r}: give NAME=NUMBER, NAME one of {known}")
    return out


def task_thresholds(run: Run, task: str, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The thresholds for ``task``: defaults, then the task's ``metadata.validity``, then ``overrides``."""
    from bias_harness.errors import BadInput

    try:
        return validity.thresholds((run.configs.get(task) or {}).get("metadata"), overrides)
    except ValueError as err:
        raise BadInput(f"task {task}: {err}") from err


class Verdicts:
    """Verdicts of one run, with each task's completed results and thresholds made once."""

    def __init__(self, run: Run, overrides: Mapping[str, float] | None = None) -> None:
        self.run, self.overrides = run, dict(overrides or {})
        self._results: dict[str, TaskResults] = {}

    def results(self, task: str) -> TaskResults:
        if task not in self._results:
            self._results[task] = TaskResults(self.run, task)
        return self._results[task]

    def verdict(self, task: str, metric: str) -> validity.Verdict | None:
        return validity.verdict(task, metric, self.results(task), task_thresholds(self.run, task, self.overrides))

    def direction(self, task: str, metric: str) -> str:
        return validity.direction(task, metric, self.results(task), task_thresholds(self.run, task, self.overrides))

    def headline(self, task: str) -> list[tuple[str, Any, validity.Verdict]]:
        """(metric, value, verdict) for each headline metric of ``task`` (its ``metric_list``) that has a verdict."""
        cfg = self.run.configs.get(task) or {}
        # with --metadata '{"breakdown": true}' the metric_list also holds the breakdowns: not headline metrics
        breakdowns = {
            m.get("metric") for m in (cfg.get("metadata") or {}).get("breakdown_metrics") or [] if isinstance(m, dict)
        }
        names = [
            m["metric"]
            for m in cfg.get("metric_list") or []
            if isinstance(m, dict) and "metric" in m and m["metric"] not in breakdowns
        ]
        rows = []
        for name in names or list(self.results(task)):
            v = self.verdict(task, name)
            if v is not None:
                rows.append((name, self.results(task).get(name), v))
        return rows


def markdown(verdicts: Verdicts, tasks: list[str]) -> str:
    """The "Interpretability" table of ``tasks`` (one row per headline metric with a verdict), or "" when none."""
    from bias_harness.datasets_src.base import PROJECT_URL

    rows = [(t, m, value, v) for t in tasks for m, value, v in verdicts.headline(t)]
    if not rows:
        return ""
    lines = [
        "#### Interpretability",
        "",
        "Whether each headline number can be read as bias, or reflects the format of the answers behind it "
        f"(checks and thresholds: [docs/validity.md]({PROJECT_URL}/blob/main/docs/validity.md)).",
        "",
        "| task | metric | value | verdict | why |",
        "|---|---|---|---|---|",
    ]
    for task, metric, value, v in rows:
        verdict = "interpretable" if v.interpretable else "**not interpretable**"
        lines.append(f"| {task} | {metric} | {fmt(value)} | {verdict} | {'; '.join(v.reasons) or '–'} |")
    return "\n".join(lines) + "\n"


def field_text(verdicts: Verdicts, task: str, metric: str, how: str | None, number: str) -> str:
    """A summary field's text: ``number`` (already formatted), with "(not interpretable: ...)" after it where the
    metric's verdict failed; with ``how == "dir"`` the metric's direction in words instead."""
    if how == "dir":
        return verdicts.direction(task, metric)
    v = verdicts.verdict(task, metric)
    return number if v is None or v.interpretable else f"{number} ({v.text()})"
