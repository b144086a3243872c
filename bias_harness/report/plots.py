"""The comparison figure: every model side by side, one bar per metric with its 95% CI."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from bias_harness.report.sections import section_name
from bias_harness.runs import Point, Run, short_label


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


def comparison_plot(
    values: dict[str, dict[str, Point]],
    path: Path,
    title: str,
    refs: dict[str, float] | Callable[[str], float | None] | None = None,
    xlabel: str = "",
    ref_label: str = "ideal",
) -> str:
    """One figure, every model side by side: for each metric (one row group) a horizontal bar per model with its
    95% CI as an error bar; ``values`` is ``{model: {metric: Point}}``; ``refs`` draws a dashed reference line per
    metric (e.g. an ideal value; ``ref_label`` names it in the title). A metric a model lacks is marked "no data".
    Returns the file name (for a link)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(values)
    metrics = list(dict.fromkeys(k for v in values.values() for k in v))
    height = 1.0 / (len(models) + 1)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(metrics) * (len(models) + 1) + 1.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, model in enumerate(models):
        for i, metric in enumerate(metrics):
            y = i + (j - (len(models) - 1) / 2) * height
            pt = values[model].get(metric)
            if pt is None or not _finite(pt.value):
                ax.text(0, y, " no data", va="center", fontsize=7, color="grey")
                continue
            err = None
            if _finite(pt.lo) and _finite(pt.hi):
                err = [[max(pt.value - pt.lo, 0.0)], [max(pt.hi - pt.value, 0.0)]]
            ax.barh(
                y,
                pt.value,
                height=height * 0.9,
                color=colors[j % len(colors)],
                xerr=err,
                capsize=3,
                label=short_label(model) if i == 0 else None,
            )
            # the value label goes past the outer end of the error bar, so the two never overlap
            neg = pt.value < 0
            end = pt.value if err is None else (min(pt.value, pt.lo) if neg else max(pt.value, pt.hi))
            label = f"{pt.value:.2f}" if abs(pt.value) < 10 else f"{pt.value:.1f}"
            ax.text(end, y, f"{label} " if neg else f" {label}", va="center", ha="right" if neg else "left", fontsize=7)
    ref_of = refs.get if isinstance(refs, dict) else refs
    for i, metric in enumerate(metrics):
        ref = ref_of(metric) if ref_of else None
        if ref is not None:
            ax.plot([ref] * 2, [i - 0.5, i + 0.5], ls="--", color="green", lw=1)
    ax.axvline(0, color="black", lw=0.6)
    ax.margins(x=0.12)  # room for the value labels
    ax.set_yticks(range(len(metrics)), metrics)
    ax.invert_yaxis()
    ax.set_title(textwrap.fill(title + ("" if not refs else f" (dashed: {ref_label})"), 70), fontsize=10)
    ax.set_xlabel(xlabel or "value (error bars: 95% CI)")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def section_figure(section: ModuleType, runs: dict[str, Run], models: list[str], out: Path) -> str:
    """The section's comparison figure (if it defines ``points``), as a Markdown image line, or ""."""
    if not hasattr(section, "points"):
        return ""
    values = {m: section.points(runs[m]) for m in models}
    values = {m: v for m, v in values.items() if v}
    if not values:
        return ""
    name = section_name(section)
    file = comparison_plot(
        values,
        out / f"{name}_comparison.png",
        getattr(section, "TITLE", name),
        refs=getattr(section, "POINT_REFS", None),
        ref_label=getattr(section, "POINT_REF_LABEL", "ideal"),
    )
    return f"![{name}: models side by side, 95% CIs]({file})\n"
