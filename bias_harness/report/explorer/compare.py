"""The explorer of ``bias-harness compare A B --html``: each compared metric (difference B - A, its 95% paired CI,
p-value, both runs' verdicts) one click from the two runs' documents side by side, filtered to those answered
differently where asked (same document key in both runs)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from bias_harness.report.explorer import build, page, svg
from bias_harness.runs import Point, load_run, short_label


def _p(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2g}" if value < 1e-3 else f"{value:.4f}"


def _outcome(v: Any) -> str:
    return "–" if v is None else escape(getattr(v, "outcome", "") or ("interpretable" if v.interpretable else ""))


def write_compare_explorer(
    comparisons: Sequence[Any], run_a: str | Path, runs_b: Sequence[str | Path], out: str | Path
) -> Path:
    """Write the comparison explorer of ``comparisons`` (:func:`bias_harness.report.compare.compare_runs` of
    ``run_a`` with each of ``runs_b``) to the file ``out``."""
    from bias_harness.report.verdicts import Verdicts

    a = load_run(run_a)
    checked_a = Verdicts(a)
    parts = [
        "<header><h1>bias-harness compare</h1><p class=lede>Every compared number with the difference B − A, its "
        "95% paired CI and p-value, and both runs' verdicts; click a metric for the two runs' documents side by "
        "side (tick “only where the answers differ”).</p></header>"
    ]
    index: dict[str, Any] = {"tasks": {}}
    blobs: dict[str, str] = {}
    views_a: dict[str, build.TaskView] = {}
    for k, (cmp, run_b) in enumerate(zip(comparisons, runs_b)):
        b = load_run(run_b)
        checked_b = Verdicts(b)
        parts.append(
            f"<section class=work><h2>A: <code>{escape(short_label(cmp.label_a))}</code> · B: "
            f"<code>{escape(short_label(cmp.label_b))}</code></h2>"
        )
        parts.append(page._manifest_table(build.manifest(a) + build.manifest(b)))
        tasks = list(dict.fromkeys(m.task for m in cmp.metrics))
        for task in tasks:
            if task not in views_a:
                views_a[task] = build.task_view(a, task, checked_a, 0)
            va, vb = views_a[task], build.task_view(b, task, checked_b, k + 1)
            tid = f"c{k}-{build.slug(task)}"
            blobs[f"{tid}-a"] = build.packed(va.rows, va.diagnostics)
            blobs[f"{tid}-b"] = build.packed(vb.rows, [])
            scopes = {n.metric: n.scope for n in va.numbers}
            rows = []
            for m in (m for m in cmp.metrics if m.task == task):
                link = f'<a class="num" href="#t={tid}&amp;m={escape(m.metric)}">{escape(m.metric)}</a>'
                rows.append(
                    f"<tr><th scope=row>{link}</th><td>{page._num(m.value_a)}</td><td>{page._num(m.value_b)}</td>"
                    f"<td>{page._num(m.diff)}</td><td>[{page._num(m.ci_lo)}, {page._num(m.ci_hi)}]</td>"
                    f"<td>{_p(m.p)} <small>({escape(m.test)})</small></td>"
                    f"<td>{'yes' if m.significant else 'no'}</td><td>{_outcome(m.verdict_a)}</td>"
                    f"<td>{_outcome(m.verdict_b)}</td></tr>"
                )
            mine = [m for m in cmp.metrics if m.task == task]
            chart = svg.forest(
                {"B − A": {m.metric: Point(m.diff, m.ci_lo, m.ci_hi) for m in mine}},
                f"{task}: B − A with 95% paired CIs",
                lambda _model, metric, tid=tid: f"#t={tid}&m={metric}",
                lambda _metric: 0.0,
                "no change",
            )
            parts.append(
                f'<section class="task" id="task-{tid}"><h4><code>{escape(task)}</code> · '
                f'<a href="#t={tid}&amp;differ=1">documents answered differently</a> · '
                f'<a href="#t={tid}">all {va.n_docs} documents</a></h4>'
                '<table class="numbers"><thead><tr><th scope=col>metric</th><th scope=col>A</th><th scope=col>B</th>'
                "<th scope=col>B − A</th><th scope=col>95% CI</th><th scope=col>p (test)</th>"
                "<th scope=col>significant</th><th scope=col>verdict A</th><th scope=col>verdict B</th></tr></thead>"
                "<tbody>" + "".join(rows) + "</tbody></table>" + f'<figure class="figure">{chart}</figure></section>'
            )
            index["tasks"][tid] = {
                "task": task,
                "model": f"A: {short_label(cmp.label_a)} · B: {short_label(cmp.label_b)}",
                "work": va.work,
                "n": va.n_docs,
                "numbers": {
                    m.metric: {"value": m.diff, "scope": scopes.get(m.metric, {}), "outcome": None}
                    for m in cmp.metrics
                    if m.task == task
                },
            }
        parts.append("</section>")
    body = build.redacted("".join(parts))
    return page._write(out, page._page("bias-harness compare", body, build.redacted(index), blobs, "compare"))
