"""The report's side of the interpretability verdicts (:mod:`bias_harness.plugins.validity`), for every work alike.

* :class:`Verdicts`: every verdict of one run, made once with the report's thresholds and multiplicity adjustment;
  each work's section (``render(run, out_dir, verdicts)``), the Interpretability table, the summary fields,
  ``bias-harness compare`` and the mitigation model card read their verdicts from it, so they cannot disagree;
* :class:`TaskResults`: one task's results with plain metric names; a metric lm-eval did not aggregate (a breakdown
  of a run without ``--metadata '{"breakdown": true}'``) is computed on first use by the task's report section
  (``metric_value``, with the run's own task settings: :meth:`bias_harness.runs.Run.settings`), from the logged
  samples, as the section's tables show it;
* :func:`task_thresholds`: the documented thresholds, the task's ``metadata.validity`` (from the run's task
  config) and the caller's overrides (``bias-harness report --threshold NAME=VALUE``);
* :func:`markdown`: per task, the verdict on each headline metric that has one (metric, value, outcome and why);
* :func:`field_text`: a summary field: the number, marked where its verdict failed (the reason is given once per
  paragraph by :func:`bias_harness.report.summary.fill_summary`); format ``dir``: the verdict in words.

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
    """``["min_valid=50", ...]`` -> ``{"min_valid": 50.0}``: each name one of ``validity.DEFAULT_THRESHOLDS`` (read
    at run time), each value a finite number within the threshold's range; else one error naming the pair and the
    nearest known name (:func:`bias_harness.plugins.validity.check_threshold`)."""
    from bias_harness.errors import BadInput

    out: dict[str, float] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep:
            raise BadInput(
                f"--threshold {pair!r}: give NAME=NUMBER, NAME one of {', '.join(validity.DEFAULT_THRESHOLDS)}"
            )
        try:
            out[name.strip()] = validity.check_threshold(name.strip(), value.strip(), "--threshold")
        except ValueError as err:
            raise BadInput(str(err)) from None
    return out


def task_thresholds(run: Run, task: str, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The thresholds for ``task``: defaults, then the task's ``metadata.validity``, then ``overrides``."""
    from bias_harness.errors import BadInput

    try:
        return validity.thresholds((run.configs.get(task) or {}).get("metadata"), overrides)
    except ValueError as err:
        raise BadInput(f"task {task}: {err}") from err


DEFAULT_MULTIPLICITY = "holm"


class Verdicts:
    """Every verdict of one run, made once with the report's thresholds: the one object that every table of a work's
    section, the Interpretability table, the summaries, ``compare`` and the model card read (their verdicts agree by
    construction). ``multiplicity``: how breakdown tables adjust their p-values for the number of tests they make
    (:func:`bias_harness.plugins.stats.adjust_p`: ``holm``, ``bh`` or ``none``)."""

    def __init__(
        self, run: Run, overrides: Mapping[str, float] | None = None, multiplicity: str = DEFAULT_MULTIPLICITY
    ) -> None:
        from bias_harness.errors import BadInput
        from bias_harness.plugins.stats import ADJUSTMENTS

        if multiplicity not in ADJUSTMENTS:
            raise BadInput(f"--multiplicity {multiplicity!r}: give one of {', '.join(ADJUSTMENTS)}")
        self.run, self.overrides, self.multiplicity = run, dict(overrides or {}), multiplicity
        self._results: dict[str, TaskResults] = {}
        self._cache: dict[tuple[str, str], validity.Verdict | None] = {}

    def results(self, task: str) -> TaskResults:
        if task not in self._results:
            self._results[task] = TaskResults(self.run, task)
        return self._results[task]

    def thresholds(self, task: str) -> dict[str, float]:
        return task_thresholds(self.run, task, self.overrides)

    def verdict(self, task: str, metric: str) -> validity.Verdict | None:
        key = (task, metric)
        if key not in self._cache:
            self._cache[key] = validity.verdict(task, metric, self.results(task), self.thresholds(task))
        return self._cache[key]

    def direction(self, task: str, metric: str) -> str:
        return validity.direction(task, metric, self.results(task), self.thresholds(task))

    def adjust(self, pvalues: list[float | None]) -> list[float | None]:
        """The p-values of one breakdown table, adjusted for the number of tests in it."""
        from bias_harness.plugins.stats import adjust_p

        return adjust_p(pvalues, self.multiplicity)

    def alpha(self, task: str) -> float:
        return self.thresholds(task)["alpha"]

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


def outcome_cell(v: validity.Verdict | None) -> str:
    """A verdict in a table cell: the outcome in bold where it is not a valid measurement, with the MDE or direction."""
    if v is None:
        return "–"
    return f"**{v.outcome}**" if v.outcome == validity.NOT_INTERPRETABLE else v.headline()


def markdown(verdicts: Verdicts, tasks: list[str]) -> str:
    """The "Interpretability" table of ``tasks`` (one row per headline metric with a verdict), or "" when none."""
    from bias_harness.datasets_src.base import PROJECT_URL

    rows = [(t, m, value, v) for t in tasks for m, value, v in verdicts.headline(t)]
    if not rows:
        return ""
    lines = [
        "#### Interpretability",
        "",
        "What each headline number says: **not interpretable** (the measurement failed: the number reflects the "
        "format of the answers), *no detectable bias* (valid, within noise; MDE: the smallest effect the run would "
        f"have detected with {verdicts_power(verdicts, tasks)} power), *bias* (valid, beyond noise, with its "
        "direction) or *interpretable* (valid; a measurement with no null value to test). Checks, thresholds and "
        f"tests: [docs/validity.md]({PROJECT_URL}/blob/main/docs/validity.md).",
        "",
        "| task | metric | value | outcome | why |",
        "|---|---|---|---|---|",
    ]
    for task, metric, value, v in rows:
        lines.append(f"| {task} | {metric} | {fmt(value)} | {outcome_cell(v)} | {v.why() or '–'} |")
    return "\n".join(lines) + "\n"


def verdicts_power(verdicts: Verdicts, tasks: list[str]) -> str:
    powers = sorted({verdicts.thresholds(t)["power"] for t in tasks})
    return "/".join(f"{p:.0%}" for p in powers)


def field_text(verdicts: Verdicts, task: str, metric: str, how: str | None, number: str) -> tuple[str, str | None]:
    """A summary field: (its text, the reason to give once at the end of the paragraph, or None).

    The number (already formatted), marked where its verdict failed (the reason goes to the paragraph's end, once);
    with ``how == "dir"`` the verdict in words: the direction where a bias was detected, "no detectable bias (MDE
    x)" where the number is within noise, else marked "not interpretable"."""
    v = verdicts.verdict(task, metric)
    failed = v is not None and v.outcome == validity.NOT_INTERPRETABLE
    if how == "dir":
        if failed:
            return validity.NOT_INTERPRETABLE, v.why()  # type: ignore[union-attr]
        return verdicts.direction(task, metric), None
    return number, (v.why() if failed else None)  # type: ignore[union-attr]
