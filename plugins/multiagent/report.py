"""Report section for the multi-agent implicit-bias tasks (Borah & Mihalcea 2024): the three percentages and the
bias score for first vs last responses (plot), per domain, the spread over runs, invalid rates, detection and
the School case study.

The breakdowns (percentages, spread over runs, per domain) are in lm-eval's results only with the breakdown switch;
without it they are computed here from the logged samples, with the tasks' own aggregations (same values)."""

from __future__ import annotations

import json
import math
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

from bias_harness.runs import Point, Run, fmt, metric_point

TITLE = "Multi-agent implicit bias (task assignment)"
ORDER = 30

RESPONSES = ("all_responses", "first_response", "reflection_response", "last_response")
# Paper Table 1 (bias scores), for orientation only: other models, the authors' runs and prompts.
PAPER_TABLE1 = {
    "gpt-35-turbo": {
        "no interaction": 0.5214,
        "no goal first": 0.53,
        "no goal last": 0.5707,
        "goal first": 0.2727,
        "goal last": 0.5741,
    },
    "gpt-4": {
        "no interaction": 0.6990,
        "no goal first": 0.4362,
        "no goal last": 0.5462,
        "goal first": 0.4888,
        "goal last": 0.6228,
    },
    "mistral-7b-instruct": {
        "no interaction": 0.4898,
        "no goal first": 0.5139,
        "no goal last": 0.5203,
        "goal first": 0.2527,
        "goal last": 0.5722,
    },
}


def matches(task: str) -> bool:
    return task.startswith("multiagent_")


def _responses(run: Run, task: str) -> list[str]:
    return [r for r in RESPONSES if run.metric(task, f"{r}_bias_score") is not None]


def points(run: Run) -> dict[str, Point]:
    """Bias score (Eq. 1) with its 95% CI per task and response kind (``<responses> <task>``), for the comparison
    figure."""
    return {
        f"{r.replace('_', ' ')} {t.removeprefix('multiagent_')}": metric_point(run, t, f"{r}_bias_score")
        for t in run.tasks()
        if matches(t)
        for r in _responses(run, t)
    }


POINT_REFS = lambda metric: 0.0  # noqa: E731  (as many anti-stereotypical as stereotypical assignments)


@lru_cache(maxsize=16)
def _logged_items(path: Path, mtime: float) -> tuple[dict[str, list[Any]], tuple[str, ...]]:
    """(items per response kind, domains) of a samples file: every response kind's bias-score key holds every
    document's item. Cached per file version (the report asks for many metrics of one task)."""
    from bias_harness.plugins.multiagent import metrics as mm

    with open(path, encoding="utf-8") as f:
        samples = [json.loads(line) for line in f if line.strip()]
    key = "{}_bias_score".format
    logged = {r: [s[key(r)] for s in samples if isinstance(s.get(key(r)), list)] for r in RESPONSES}
    items = {r: its for r, its in logged.items() if its}
    return items, mm.domains_of(samples[0]["doc"]) if samples else ()


class _Task:
    """One assignment task of a run: lm-eval's metrics, and its logged items for what lm-eval did not compute."""

    def __init__(self, run: Run, task: str) -> None:
        from bias_harness.plugins.multiagent import metrics as mm

        self.run, self.task = run, task
        path = run.sample_files.get(task)
        self.items, domains = _logged_items(path, path.stat().st_mtime) if path else ({}, ())
        self.keys = set(mm.metric_keys(list(self.items), domains)) if self.items else set()

    def metric(self, resp: str | None, stat: str) -> Any:
        """Metric ``<resp>_<stat>`` (``resp`` None: a metric over every response): lm-eval's value, else (a breakdown
        of a run without the switch) the task's aggregation on the logged items; None where the task has no such
        metric or the run no samples."""
        from bias_harness.plugins.multiagent.metrics import aggregate

        key = f"{resp}_{stat}" if resp else stat
        value = self.run.metric(self.task, key)
        if value is not None or key not in self.keys or resp is None:  # (metrics over every response: headline)
            return value
        return aggregate(key, self.items[resp])

    def per_run(self, resp: str) -> dict[int, float]:
        """Per-run bias scores from the logged samples (empty without --log_samples)."""
        from bias_harness.plugins.multiagent.metrics import run_values

        return run_values(self.items[resp], "bias_score") if resp in self.items else {}

    def notes(self, resp: str) -> str | None:
        """Every note letter of the response kind's answers (``metrics.NOTES``; None: logged before notes existed)."""
        from bias_harness.plugins.multiagent.metrics import notes_of

        return notes_of(self.items[resp]) if resp in self.items else None


def metric_value(run: Run, task: str, name: str) -> float | None:
    """A multi-agent metric lm-eval did not aggregate (a breakdown), from the logged samples (None: not one)."""
    from bias_harness.plugins.multiagent.metrics import TASK_STATS

    if not matches(task):
        return None
    view = _Task(run, task)
    resp = next((r for r in RESPONSES if name.startswith(f"{r}_")), None)
    if resp is None and name not in TASK_STATS:
        return None
    value = view.metric(resp, name.removeprefix(f"{resp}_") if resp else name)
    return float(value) if isinstance(value, (int, float)) else None


def _plot(path: Path, rows: list[tuple[str, dict[str, tuple[float, float, float]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    kinds = [r for r in RESPONSES if any(r in d for _, d in rows)]
    colors = {
        "all_responses": "#8172b2",
        "first_response": "#4c72b0",
        "reflection_response": "#ccb974",
        "last_response": "#c44e52",
    }
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
        ax.bar(
            x + (i - (len(kinds) - 1) / 2) * width,
            vals,
            width,
            yerr=[lo, hi],
            capsize=2,
            label=kind.replace("_", " "),
            color=colors[kind],
        )
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


def render(run: Run, out_dir: Path, verdicts: Any) -> str:
    tasks = [t for t in run.tasks() if matches(t)]
    assign = [t for t in tasks if _responses(run, t)]
    parts = [f"## {TITLE}", ""]
    parts.append(
        "Each assignment is classified with the paper's balanced-pairs rule as stereotypical, anti-stereotypical or "
        "neutral; bias score = (stereotypical - anti-stereotypical) / valid assignments, averaged over runs (sampled "
        "runs; character orders too with agent_order: permuted). Invalid = an answer the parser does not read "
        '(excluded from the percentages, counted in the invalid rate; the rules: table "Answers per parser rule"). '
        "Outcome: the verdict on the score against 0 (plugins/multiagent/validity.py: not interpretable, no "
        "detectable bias with its minimum detectable effect, or the direction; the 95% CI decides; "
        'tasks/multiagent/README.md, "Verdicts").'
    )
    parts.append("")
    if assign:
        head = [
            "task",
            "responses",
            "valid (n)",
            "% neutral",
            "% stereotypical",
            "% anti-stereotypical",
            "bias score",
            "95% CI",
            "outcome",
            "run std",
            "invalid rate",
        ]
        parts += [_line(head), "|---" * len(head) + "|"]
        plot_rows: list[tuple[str, dict[str, tuple[float, float, float]]]] = []
        views = [_Task(run, t) for t in assign]
        for view in views:
            t = view.task
            per: dict[str, tuple[float, float, float]] = {}
            for r in _responses(run, t):
                m = lambda k: view.metric(r, k)  # noqa: E731
                per[r] = (m("bias_score"), m("bias_score_ci_lo"), m("bias_score_ci_hi"))
                parts.append(
                    _line(
                        [
                            t,
                            r.replace("_", " "),
                            _count(m("n_valid")),
                            _pct(m("pct_neutral")),
                            _pct(m("pct_stereotypical")),
                            _pct(m("pct_anti_stereotypical")),
                            f"**{fmt(m('bias_score'))}**",
                            _interval(m, "bias_score"),
                            _outcome(verdicts, t, f"{r}_bias_score"),
                            fmt(m("bias_score_run_std")),
                            fmt(m("invalid_rate")),
                        ]
                    )
                )
            plot_rows.append((t, per))
        parts += ["", *_degenerate_table(views, verdicts)]
        png = out_dir / "multiagent_bias_scores.png"
        _plot(png, plot_rows)
        parts += ["", f"![bias scores]({png.name})", ""]
        parts += _rules_table(views)
        parts += _domain_table(views)
        parts += _runs_table(views)
        parts += [
            "Paper Table 1 (bias scores of the authors' models on the Scenarios dataset, for orientation only: other "
            "models and sampling; the paper gives no such table for the Test set):",
            "",
            "| model | no interaction | no goal first | no goal last | goal first | goal last |",
            "|---|---|---|---|---|---|",
        ]
        for model, row in PAPER_TABLE1.items():
            parts.append(f"| {model} | " + " | ".join(fmt(v, 4) for v in row.values()) + " |")
        parts.append("")
    if "multiagent_detect" in tasks:
        t = "multiagent_detect"
        parts += [
            "### Detection (fine-tune dev set)",
            "",
            "| accuracy | 95% CI | acc. on 'present' | acc. on 'absent' | predicted 'present' | invalid rate |",
            "|---|---|---|---|---|---|",
            f"| {fmt(run.metric(t, 'acc'))} | [{fmt(run.metric(t, 'acc_ci_lo'))}, {fmt(run.metric(t, 'acc_ci_hi'))}] "
            f"| {fmt(run.metric(t, 'acc_present'))} | {fmt(run.metric(t, 'acc_absent'))} | "
            f"{fmt(run.metric(t, 'pred_present_rate'))} | {fmt(run.metric(t, 'invalid_rate'))} |",
            "",
        ]
    school = [t for t in tasks if t.startswith("multiagent_school_")]
    if school:
        parts += [
            "### School case study (share of male picks; 2 of 4 students are male)",
            "",
            "95% CI: bootstrap over the dialogues (the agents of one dialogue talk to each other); outcome: the "
            "verdict against 0.5 (plugins/multiagent/validity.py).",
            "",
            "| task | first response | 95% CI | outcome | last response | 95% CI | outcome | invalid rate |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for t in school:
            cells = []
            for r in ("first_response", "last_response"):
                name = f"{r}_share_male"
                ci = f"[{fmt(run.metric(t, f'{name}_ci_lo'))}, {fmt(run.metric(t, f'{name}_ci_hi'))}]"
                cells += [fmt(run.metric(t, name)), ci, _outcome(verdicts, t, name)]
            parts.append(f"| {t} | " + " | ".join(cells) + f" | {fmt(run.metric(t, 'invalid_rate'))} |")
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
            out += (
                [
                    "Bias score per domain (point estimates from the logged samples, with no CI and no test: no "
                    "direction is read from them; the verdicts are the task's, above):",
                    "",
                    "| task | responses | " + " | ".join(d.replace("_", " ") for d in domains) + " |",
                    "|---|---|" + "---|" * len(domains),
                ]
                + rows
                + [""]
            )
    return out


def _runs_table(views: list[_Task]) -> list[str]:
    rows = []
    for view in views:
        for r in _responses(view.run, view.task):
            per = view.per_run(r)
            if per:
                vals = [v for v in per.values() if not math.isnan(v)]
                spread = f"{fmt(min(vals))} – {fmt(max(vals))}" if vals else "n/a"
                rows.append(
                    f"| {view.task} | {r.replace('_', ' ')} | "
                    + ", ".join(f"{k}: {fmt(v)}" for k, v in per.items())
                    + f" | {spread} |"
                )
    if not rows:
        return ["(Per-run scores need `--log_samples`.)", ""]
    return ["Bias score per run:", "", "| task | responses | per run | min – max |", "|---|---|---|---|"] + rows + [""]


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _interval(metric: Any, name: str) -> str:
    return f"[{fmt(metric(f'{name}_ci_lo'))}, {fmt(metric(f'{name}_ci_hi'))}]"


def _count(value: Any) -> str:
    return fmt(int(value)) if isinstance(value, float) and value == value else fmt(value)


def _outcome(verdicts: Any, task: str, metric: str) -> str:
    """The verdict's outcome in a table cell (the reasons of a failed one are in the Interpretability table)."""
    v = verdicts.verdict(task, metric)
    if v is None:
        return "–"
    return "**not interpretable**" if not v.interpretable else v.headline()


def _degenerate_table(views: list[_Task], verdicts: Any) -> list[str]:
    """Degenerate assignments beside the paper's score: their share, and the score without them with its verdict."""
    rows = []
    for view in views:
        for r in _responses(view.run, view.task):
            m = lambda k: view.metric(r, k)  # noqa: E731
            rows.append(
                _line(
                    [
                        view.task,
                        r.replace("_", " "),
                        _pct(m("degenerate_rate")),
                        _pct(m("one_person_rate")),
                        _pct(m("placeholder_rate")),
                        fmt(m("bias_score")),
                        f"**{fmt(m('bias_score_nondegenerate'))}**",
                        _interval(m, "bias_score_nondegenerate"),
                        _outcome(verdicts, view.task, f"{r}_bias_score_nondegenerate"),
                    ]
                )
            )
    return [
        "Degenerate assignments give every task to one gender (one person included): with as many male as "
        'female tasks the balanced-pairs rule makes them ties, which the paper\'s "else" branch (`tie_rule: '
        "anti`) counts anti-stereotypical. Placeholder answers copy the format's placeholders (share of all "
        "answers; invalid).",
        "",
        _line(
            [
                "task",
                "responses",
                "% degenerate (of valid)",
                "% one person",
                "% placeholder answers",
                "bias score",
                "without degenerate",
                "95% CI",
                "outcome",
            ]
        ),
        "|---" * 9 + "|",
        *rows,
        "",
    ]


def _rules_table(views: list[_Task]) -> list[str]:
    """Answers per parser rule (every response kind), one column per task."""
    from bias_harness.plugins.multiagent.metrics import NOTES

    counts: dict[str, Counter] = {}
    for view in views:
        letters = [view.notes(r) for r in _responses(view.run, view.task)]
        if any(n is None for n in letters):
            continue  # logged before the notes existed
        counts[view.task] = Counter("".join(letters))  # type: ignore[arg-type]
    if not counts:
        return []
    shapes = {
        ".": "valid (several people, both genders)",
        "g": "valid: every task to one gender",
        "p": "valid: every task to one person",
    }
    head = "| rule | reads as | " + " | ".join(t.removeprefix("multiagent_") for t in counts) + " |"
    lines = [
        "Answers per parser rule (`plugins/multiagent/parse.py`, and the genders the answer states; every "
        'response kind; tasks/multiagent/README.md, "Parsing"):',
        "",
        head,
        "|---|---|" + "---|" * len(counts),
    ]
    for letter, name in NOTES.items():
        cells = [counts[t][letter] for t in counts]
        if any(cells):
            rule, reads = (shapes[letter], "valid") if letter in shapes else (f"`{name}`", "invalid")
            lines.append(f"| {rule} | {reads} | " + " | ".join(map(str, cells)) + " |")
    return lines + [""]
