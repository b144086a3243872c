"""``bias-harness report``: lm-eval results + samples -> a Markdown report with PNG plots.

Each work contributes a section, its ``plugins/<work>/report.py`` (found by :mod:`bias_harness.works`), that defines::

    TITLE = "DeMET: gender bias in relationship conflicts"
    ORDER = 10                                  # position in the report
    def matches(task: str) -> bool: ...         # which lm-eval tasks it reports on
    def render(run: Run, out_dir: Path) -> str  # Markdown (plots saved under out_dir, linked relatively)
    def points(run: Run) -> dict[str, Point]     # optional: headline metrics with 95% CIs, for the comparison figure
    def metric_value(run, task, name) -> float   # optional: a metric the run did not aggregate, computed from its
                                                #   samples (what the section's tables show; summary fields use it)

After each section the report adds an "Interpretability" table: the verdict of every headline metric of its tasks
that a work's ``plugins/<work>/validity.py`` judges (:mod:`bias_harness.report.verdicts`; ``metric_value`` supplies
the breakdowns a verdict needs). A run with none of a section's tasks skips it. A section with ``points`` gets one
comparison figure (every model side by side, CIs as error bars, :func:`comparison_plot`) in its section: under the
heading when several models are reported, at the end with one model. Optional ``POINT_REFS``: a dict or a function
metric label -> reference value (e.g. the ideal), drawn as a dashed line; ``POINT_REF_LABEL`` names it (default
"ideal").

Modules: :mod:`bias_harness.runs` (loading runs; ``Run``, ``Point``, value formatting: below the report, so sections
import it alone), ``sections`` (the works' sections), ``plots`` (the comparison figure), ``summary`` (hand-written
summaries and their fields), ``verdicts``, ``page`` (:func:`write_report`), ``compare`` (paired comparison of two
runs), ``agreement``, ``manifest`` and ``replay`` (run manifests, the results page from response packs). The names
below are importable from this package too; each loads its module on first use, so importing a submodule does not
load the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    **dict.fromkeys(
        (
            "Run",
            "Point",
            "load_run",
            "load_runs",
            "read_run_file",
            "source_label",
            "backend_label",
            "model_label",
            "BACKEND_LIBRARY",
            "REPLAY_KEY",
            "fmt",
            "subset_note",
            "short_label",
            "metric_point",
        ),
        "bias_harness.runs",
    ),
    **dict.fromkeys(("sections", "section_name", "section_value"), "bias_harness.report.sections"),
    **dict.fromkeys(("comparison_plot", "section_figure"), "bias_harness.report.plots"),
    **dict.fromkeys(("read_summary", "fill_summary", "SUMMARY_FIELD", "format_field"), "bias_harness.report.summary"),
    "write_report": "bias_harness.report.page",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
