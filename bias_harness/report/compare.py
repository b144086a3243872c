"""Paired comparison of two run folders: :func:`compare_runs` (the statistics and each work's adapter are
``plugins/paired.py``), its Markdown section and forest plot; used by ``bias-harness compare`` and the model card of
``bias-harness mitigate``. Not a report section of its own (no ``matches``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from bias_harness.plugins import stats
from bias_harness.plugins.paired import (
    ALPHA,
    Comparison,
    MetricComparison,
    RunMismatch,
    adapter_for,
    compare_task,
    match_documents,
)
from bias_harness.plugins.validity import Verdict
from bias_harness.report.verdicts import Verdicts
from bias_harness.runs import fmt, load_run, short_label


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    tasks: Sequence[str] | None = None,
    unit: str | None = None,
    iters: int = stats.BOOTSTRAP_ITERS,
    seed: int = stats.BOOTSTRAP_SEED,
    thresholds: dict[str, float] | None = None,
) -> Comparison:
    """Compare every task the two lm-eval output folders share (or ``tasks``); see the module docstring. Each metric
    carries both runs' interpretability verdicts (``thresholds``: overrides, :mod:`bias_harness.plugins.validity`)."""
    a, b = load_run(run_a), load_run(run_b)
    checked = Verdicts(a, thresholds), Verdicts(b, thresholds)
    wanted = list(tasks) if tasks else sorted(set(a.results) | set(b.results))
    missing = {t: [str(r) for r, run in ((run_a, a), (run_b, b)) if t not in run.results] for t in wanted}
    missing = {t: rs for t, rs in missing.items() if rs}
    if missing:
        raise RunMismatch(
            "the runs do not cover the same tasks: "
            + "; ".join(f"{t} missing in {', '.join(rs)}" for t, rs in missing.items())
            + " (give --tasks to compare the shared ones)"
        )
    label = lambda run, t: run.model.get(t, "?")  # noqa: E731
    out = Comparison(
        str(run_a),
        str(run_b),
        label(a, wanted[0]) if wanted else "?",
        label(b, wanted[0]) if wanted else "?",
        iters,
        seed,
    )
    for task in wanted:
        rec_a, rec_b = a.samples(task), b.samples(task)
        if not rec_a and not rec_b and not a.configs.get(task, {}).get("metric_list"):
            out.skipped[task] = "a group (its subtasks are compared one by one)"
            continue
        for recs, r in ((rec_a, run_a), (rec_b, run_b)):
            if not recs:
                raise RunMismatch(f"task {task}: no samples_{task}_*.jsonl in {r}: run lm-eval with --log_samples")
        matched = match_documents(task, rec_a, rec_b, str(run_a), str(run_b))
        keys = set(rec_a[0].get("metrics") or [])
        adapter = adapter_for(keys, rec_a)
        if adapter is None:
            out.skipped[task] = "no headline metric with a known aggregation"
            continue
        for filt, pairs in matched.items():
            found = compare_task(
                task, pairs, adapter, filt, unit, iters, seed, (a.results.get(task, {}), b.results.get(task, {}))
            )
            if adapter.work == "generic":  # aggregation unknown: keep only metrics lm-eval averaged (mean == recorded)
                dropped = [m.metric for m in found if not m.consistent or m.recorded_a is None]
                found = [m for m in found if m.consistent and m.recorded_a is not None]
                if dropped:
                    out.skipped[f"{task} ({filt})"] = "not a mean of per-document numbers: " + ", ".join(dropped)
            for m in found:
                m.verdict_a, m.verdict_b = (c.verdict(task, m.metric) for c in checked)
            out.metrics += found
    if unit and not any(unit in (m.unit, m.unit.replace(" ", "_")) for m in out.metrics):
        raise ValueError(f"no compared task offers the resampling unit {unit!r} (tasks: {', '.join(wanted)})")
    return out


def p_text(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2g}" if value < 1e-3 else f"{value:.4f}"


def verdict(m: MetricComparison) -> str:
    if math.isnan(m.p):
        return "n/a"
    return "**yes**" if m.significant else "no"


def interpretable(v: Verdict | None) -> str:
    """A verdict in a table cell: its outcome (the reasons of a failed one go below the table) or – (none applies)."""
    return "–" if v is None else v.headline() if v.interpretable else "**not interpretable**"


def _groups(cmp: Comparison) -> dict[tuple[str, str], list[MetricComparison]]:
    out: dict[tuple[str, str], list[MetricComparison]] = {}
    for m in cmp.metrics:
        out.setdefault((m.task, m.filter), []).append(m)
    return out


def plot(metrics: list[MetricComparison], path: Path, title: str) -> Path:
    """Forest plot: the difference B - A of each metric with its 95% paired-bootstrap CI; filled = significant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(metrics) + 1.2))
    for i, m in enumerate(reversed(metrics)):
        if math.isnan(m.diff):
            ax.text(0, i, "no data", ha="center", va="center", fontsize=8, color="#888888")
            continue
        lo = m.diff - m.ci_lo if not math.isnan(m.ci_lo) else 0.0
        hi = m.ci_hi - m.diff if not math.isnan(m.ci_hi) else 0.0
        color = "#c44e52" if m.significant else "#4c72b0"
        ax.errorbar(
            m.diff,
            i,
            xerr=[[max(lo, 0.0)], [max(hi, 0.0)]],
            fmt="o",
            color=color,
            capsize=3,
            markerfacecolor=color if m.significant else "white",
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(metrics)), [m.metric for m in reversed(metrics)])
    ax.set_xlabel("B − A, 95% paired-bootstrap CI (red: significant)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render_markdown(cmp: Comparison, out_dir: Path | None = None, heading: str = "##") -> str:
    """The comparison as Markdown (one table per task and filter; forest plots saved in ``out_dir`` when given)."""
    lines = [
        f"{heading} Paired comparison: B vs A",
        "",
        f"- **A:** `{cmp.run_a}` (`{short_label(cmp.label_a)}`)",
        f"- **B:** `{cmp.run_b}` (`{short_label(cmp.label_b)}`)",
        "",
        f"Differences are B − A on the same documents. 95% CI: percentile interval of {cmp.iters} paired bootstrap "
        f"resamples (seed {cmp.seed}) of the task's resampling unit, the metric recomputed with the task's own "
        "aggregation on each. p: exact McNemar test where the metric is a share of binary per-document outcomes "
        "(documents with a defined outcome in both runs), else the two-sided paired-bootstrap p; significant: p < "
        f"{ALPHA}. A / B verdict: each run's verdict on the metric (docs/validity.md): not interpretable, no "
        "detectable bias (with its minimum detectable effect), bias (with its direction) or interpretable (no null "
        "value). Reads as: a bias in A and no detectable bias in B is a reduction of bias to below detection (where "
        "the paired test is significant); a significant difference between two valid runs is a change in bias; "
        "nothing involving a not-interpretable run is.",
        "",
    ]
    for (task, filt), metrics in _groups(cmp).items():
        first = metrics[0]
        lines += [
            f"{heading}# `{task}` (filter `{filt}`)",
            "",
            f"Resampling unit: {first.unit} ({first.n_units} units, {first.n_docs} documents).",
            "",
            "| metric | A | B | B − A | 95% CI | p | test | significant | A verdict | B verdict | reads as |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for m in metrics:
            test = m.test + (f" (b={m.mcnemar_b}, c={m.mcnemar_c}, n={m.mcnemar_n})" if m.p_mcnemar is not None else "")
            diff = "–" if math.isnan(m.diff) else f"{m.diff:+.3f}"
            lines.append(
                f"| {m.metric} | {fmt(m.value_a)} | {fmt(m.value_b)} | {diff} | [{fmt(m.ci_lo)}, {fmt(m.ci_hi)}] | "
                f"{p_text(m.p)} | {test} | {verdict(m)} | {interpretable(m.verdict_a)} | "
                f"{interpretable(m.verdict_b)} | {m.reads_as} |"
            )
        failed = [
            f"{m.metric} in {r} ({'; '.join(v.reasons)})"
            for m in metrics
            for r, v in (("A", m.verdict_a), ("B", m.verdict_b))
            if v and not v.interpretable
        ]
        if failed:
            lines += ["", "Not interpretable: " + "; ".join(failed) + "."]
        undefined = [m for m in metrics if m.n_undefined]
        if undefined:
            lines += [
                "",
                "Resamples where a metric was undefined in either run (left out of its CI and p): "
                + ", ".join(f"{m.metric} {m.n_undefined}" for m in undefined)
                + ".",
            ]
        off = [m for m in metrics if not m.consistent]
        if off:
            lines += [
                "",
                "**Differs from results_*.json** (the metric definition changed since the run?): "
                + ", ".join(f"{m.metric} (recorded {fmt(m.recorded_a)} / {fmt(m.recorded_b)})" for m in off)
                + ".",
            ]
        if out_dir is not None:
            stem = f"compare_{task}_{filt}".replace("/", "_").replace(" ", "_")
            png = plot(metrics, Path(out_dir) / f"{stem}.png", f"{task} ({filt}): B − A")
            lines += ["", f"![{task}: differences B − A]({png.name})"]
        lines.append("")
    if cmp.skipped:
        lines += ["Not compared: " + "; ".join(f"`{t}`: {why}" for t, why in cmp.skipped.items()) + ".", ""]
    return "\n".join(lines)
