"""Report section for the multi-agent implicit-bias tasks (Borah & Mihalcea 2024): the three percentages and the
bias score for first vs last responses (plot), per domain, the spread over runs, invalid rates, detection and
the School case study.

The breakdowns (percentages, spread over runs, per domain) are in lm-eval's results only with the breakdown switch;
without it they are computed here from the logged samples, with the tasks' own aggregations (same values)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bias_harness.report import Point, Run, fmt, metric_point

TITLE = "Multi-agent implicit bias (task assignment)"
ORDER = 30

RESPONSES = ("all_responses", "first_response", "reflection_response", "last_response")
# Paper Table 1 (bias scores), for orientation only: other models, the authors' runs and prompts.
PAPER_TABLE1 = {
    "gpt-35-turbo": {"no interaction": 0.5214, "no goal first": 0.53, "no goal last": 0.5707, "goal first": 0.2727, "goal last": 0.5741},
    "gpt-4": {"no interaction": 0.6990, "no goal first": 0.4362, "no goal last": 0.5462, "goal first": 0.4888, "goal last": 0.6228},
    "mistral-7b-instruct": {"no interaction": 0.4898, "no goal first": 0.5139, "no goal last": 0.5203, "goal first": 0.2527, "goal last": 0.5722},
}


def matches(task: str) -> bool:
    return task.startswith("multiagent_")


def _responses(run: Run, task: str) -> list[str]:
    return [r for r in RESPONSES if run.metric(task, f"{r}_bias_score") is not None]


def points(run: Run) -> dict[str, Point]:
    """Bias score (Eq. 1) with its 95% CI per task and response kind (``<responses> <task>``), for the comparison figure."""
    return {f"{r.replace('_', ' ')} {t.removeprefix('multiagent_')}": metric_point(run, t, f"{r}_bias_score")
            for t in run.tasks() if matches(t) for r in _responses(run, t)}  # fmt: skip


POINT_REFS = lambda metric: 0.0  # noqa: E731  (as many anti-stereotypical as stereotypical assignments)


class _Task:
    """One assignment task of a run: lm-eval's metrics, and its logged items for what lm-eval did not compute."""

    def __init__(self, run: Run, task: str) -> None:
        from bias_harness.plugins.multiagent import metrics as mm

        self.run, self.task = run, task
        samples = run.samples(task)  # every response kind's bias-score key holds every document's item
        self.items = {r: items for r in RESPONSES if (items := [s[f"{r}_bias_score"] for s in samples if isinstance(s.get(f"{r}_bias_score"), list)])}
        self.keys = set(mm.metric_keys(list(self.items), mm.domains_of(samples[0]["doc"]))) if self.items else set()

    def metric(self, resp: str, stat: str) -> Any:
        """Metric ``<resp>_<stat>``: lm-eval's value, else (a breakdown of a run without the switch) the task's
        aggregation on the logged items; None where the task has no such metric or the run no samples."""
        from bias_harness.plugins.multiagent.metrics import aggregate

        key = f"{resp}_{stat}"
        value = self.run.metric(self.task, key)
        return aggregate(key, self.items[resp]) if value is None and key in self.keys else value

    def per_run(self, resp: str) -> dict[int, float]:
        """Per-run bias scores from the logged samples (empty without --log_samples)."""
        from bias_harness.plugins.multiagent.metrics import RESPONSES as CODES
        from bias_harness.plugins.multiagent.metrics import run_values

        return run_values(self.items[resp], CODES[resp], "bias_score") if resp in self.items else {}


def _plot(path: Path, rows: list[tuple[str, dict[str, tuple[float, float, float]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    kinds = [r for r in RESPONSES if any(r in d for _, d in rows)]
    colors = {"all_responses": "#8172b2", "first_response": "#4c72b0", "reflection_response": "#ccb974", "last_response": "#c44e52"}
    x = np.arange(len(rows))
    width = 0.8 / max(1, len(kinds))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(rows) + 2), 3.6))
    for i, kind in enumerate(kinds):
        vals, lo, hi = [], [], []
        for _, d in rows:
            v, a, b = (math.nan if x is None else x for x in d.get(kind, (math.nan, math.nan, math.nan)))
            vals.append(v)  # missing / nan: no bar
            lo.append(0.0 if math.isnan(a) or math.isnan(v) else max(0.0, v - a))
            hi.append(0.0 if math.isnan(b) or math.isnan(v) else max(0.0, b - v))
        ax.bar(x + (i - (len(kinds) - 1) / 2) * width, vals, width, yerr=[lo, hi], capsize=2, label=kind.replace("_", " "), color=colors[kind])
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, [t.replace("multiagent_", "") for t, _ in rows], rotation=30, ha="right")
    ax.set_ylabel("bias score (Eq. 1)")
    ax.set_ylim(-1.05, 1.05)
    ax.set_title("Bias score, first vs last responses (95% bootstrap CI)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the title is wider than the axes
    plt.close(fig)


def _pct(share: float | None) -> str:
    """The ``pct_*`` metrics are shares (0-1, like the paper's code); the table shows percentages."""
    return fmt(100 * share, 1) if isinstance(share, float) and share == share else fmt(share)


def render(run: Run, out_dir: Path) -> str:
    tasks = [t for t in run.tasks() if matches(t)]
    assign = [t for t in tasks if _responses(run, t)]
    parts = [f"## {TITLE}", ""]
    parts.append(
        "Each assignment is classified with the paper's balanced-pairs rule as stereotypical, anti-stereotypical or neutral; "
        "bias score = (stereotypical - anti-stereotypical) / valid assignments, averaged over runs (sampled runs; character orders too with agent_order: permuted). "
        "Invalid = unparseable assignment (excluded from the percentages, counted in the invalid rate)."
    )
    parts.append("")
    if assign:
        parts += ["| task | responses | % neutral | % stereotypical | % anti-stereotypical | bias score | 95% CI | run std | invalid rate |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        plot_rows: list[tuple[str, dict[str, tuple[float, float, float]]]] = []
        views = [_Task(run, t) for t in assign]
        for view in views:
            t = view.task
            per: dict[str, tuple[float, float, float]] = {}
            for r in _responses(run, t):
                m = lambda k: view.metric(r, k)  # noqa: E731
                per[r] = (m("bias_score"), m("bias_score_ci_lo"), m("bias_score_ci_hi"))
                parts.append(
                    f"| {t} | {r.replace('_', ' ')} | {_pct(m('pct_neutral'))} | {_pct(m('pct_stereotypical'))} | "
                    f"{_pct(m('pct_anti_stereotypical'))} | **{fmt(m('bias_score'))}** | [{fmt(m('bias_score_ci_lo'))}, "
                    f"{fmt(m('bias_score_ci_hi'))}] | {fmt(m('bias_score_run_std'))} | {fmt(m('invalid_rate'))} |"
                )
            plot_rows.append((t, per))
        png = out_dir / "multiagent_bias_scores.png"
        _plot(png, plot_rows)
        parts += ["", f"![bias scores]({png.name})", ""]
        parts += _domain_table(views)
        parts += _runs_table(views)
        parts += ["Paper Table 1 (bias scores of the authors' models, for orientation only: other models and sampling):", "",
                  "| model | no interaction | no goal first | no goal last | goal first | goal last |", "|---|---|---|---|---|---|"]  # fmt: skip
        for model, row in PAPER_TABLE1.items():
            parts.append(f"| {model} | " + " | ".join(fmt(v, 4) for v in row.values()) + " |")
        parts.append("")
    if "multiagent_detect" in tasks:
        t = "multiagent_detect"
        parts += ["### Detection (fine-tune dev set)", "", "| accuracy | 95% CI | acc. on 'present' | acc. on 'absent' | predicted 'present' | invalid rate |",
                  "|---|---|---|---|---|---|",
                  f"| {fmt(run.metric(t, 'acc'))} | [{fmt(run.metric(t, 'acc_ci_lo'))}, {fmt(run.metric(t, 'acc_ci_hi'))}] | "
                  f"{fmt(run.metric(t, 'acc_present'))} | {fmt(run.metric(t, 'acc_absent'))} | {fmt(run.metric(t, 'pred_present_rate'))} | "
                  f"{fmt(run.metric(t, 'invalid_rate'))} |", ""]  # fmt: skip
    school = [t for t in tasks if t.startswith("multiagent_school_")]
    if school:
        parts += ["### School case study (share of male picks; 2 of 4 students are male)", "", "| task | first response | last response | invalid rate |", "|---|---|---|---|"]
        for t in school:
            parts.append(f"| {t} | {fmt(run.metric(t, 'first_response_share_male'))} | {fmt(run.metric(t, 'last_response_share_male'))} | {fmt(run.metric(t, 'invalid_rate'))} |")
        parts.append("")
    return "\n".join(parts)


def _domain_table(views: list[_Task]) -> list[str]:
    from bias_harness.plugins.multiagent.metrics import SCENARIO_DOMAINS, TEST_DOMAINS

    out: list[str] = []
    for domains in (SCENARIO_DOMAINS, TEST_DOMAINS):
        rows = []
        for view in views:
            for r in _responses(view.run, view.task):
                vals = [view.metric(r, f"bias_score_{d}") for d in domains]
                if any(v is not None for v in vals):
                    rows.append(f"| {view.task} | {r.replace('_', ' ')} | " + " | ".join(fmt(v) for v in vals) + " |")
        if rows:
            out += ["Bias score per domain:", "", "| task | responses | " + " | ".join(d.replace("_", " ") for d in domains) + " |",
                    "|---|---|" + "---|" * len(domains)] + rows + [""]  # fmt: skip
    return out


def _runs_table(views: list[_Task]) -> list[str]:
    rows = []
    for view in views:
        for r in _responses(view.run, view.task):
            per = view.per_run(r)
            if per:
                vals = [v for v in per.values() if not math.isnan(v)]
                spread = f"{fmt(min(vals))} – {fmt(max(vals))}" if vals else "n/a"
                rows.append(f"| {view.task} | {r.replace('_', ' ')} | " + ", ".join(f"{k}: {fmt(v)}" for k, v in per.items()) + f" | {spread} |")
    if not rows:
        return ["(Per-run scores need `--log_samples`.)", ""]
    return ["Bias score per run:", "", "| task | responses | per run | min – max |", "|---|---|---|---|"] + rows + [""]

