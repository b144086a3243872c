"""The explorer page: one self-contained HTML file (styles, scripts, figures and data inlined; no network, no server).

:func:`write_explorer` (``bias-harness report RUN... --html``, the results page's replay) and
:func:`write_compare_explorer` (``bias-harness compare A B --html``). The overview (run manifests, every task's
headline numbers with CI, verdict and reasons, the paper's range, the diagnostics, the figures) is plain HTML, readable
without JavaScript; the documents behind each number are opened by the page's script
(``assets/explorer.js``, on Preact + htm, vendored in ``assets/vendor/``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from bias_harness.report.explorer import build, svg
from bias_harness.report.explorer.build import Number, TaskView
from bias_harness.runs import Run, fmt, short_label

VENDOR = ("preact.umd.js", "hooks.umd.js", "htm.umd.js")  # load order: htm and the hooks use the preact global


def _asset(name: str) -> str:
    text = resources.files("bias_harness.report.explorer").joinpath("assets", name).read_text(encoding="utf-8")
    return re.sub(r"//# sourceMappingURL=\S+", "", text)  # no map to fetch: the page makes no request


def _script_text(text: str) -> str:
    """Text safe inside ``<script>``: no ``</script`` or ``<!--`` can end or confuse the element."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt(float(value), digits)


def _href(task_id: str, **params: str) -> str:
    return "#" + "&".join([f"t={task_id}", *(f"{k}={v}" for k, v in params.items())])


OUTCOME_CLASS = {
    "not interpretable": "bad",
    "no detectable bias": "null",
    "bias": "bias",
    "interpretable": "ok",
}


def _verdict_cell(n: Number) -> str:
    if not n.outcome and not n.verdict:
        return '<td class="outcome">–</td><td class="why">no verdict applies</td>'
    outcome = n.outcome or ("interpretable" if not n.reasons else "not interpretable")
    cls = OUTCOME_CLASS.get(outcome, "")
    why = "; ".join(n.reasons) if n.reasons else n.verdict
    mde = f" (MDE {_num(n.mde)})" if n.mde is not None else ""
    return (
        f'<td class="outcome {cls}"><strong>{escape(outcome)}</strong>{escape(mde)}</td>'
        f'<td class="why">{escape(why)}</td>'
    )


def _numbers_table(view: TaskView) -> str:
    head = (
        '<table class="numbers"><caption>Headline numbers of <code>'
        + escape(view.task)
        + "</code>: click a value for the documents behind it</caption><thead><tr><th scope=col>metric</th>"
        "<th scope=col>value</th><th scope=col>95% CI</th><th scope=col>verdict</th><th scope=col>why</th>"
        "<th scope=col>paper</th></tr></thead><tbody>"
    )
    rows = []
    for n in view.numbers:
        ci = f"[{_num(n.lo)}, {_num(n.hi)}]" if n.lo is not None or n.hi is not None else "–"
        paper = f"{_num(n.paper[0])} – {_num(n.paper[1])} <small>({escape(n.paper[2])})</small>" if n.paper else "–"
        link = (
            f'<a class="num" href="{_href(view.id, m=n.metric)}" data-metric="{escape(n.metric)}">{_num(n.value)}</a>'
        )
        rows.append(
            f"<tr><th scope=row><code>{escape(n.metric)}</code></th><td>{link}</td><td>{ci}</td>"
            f"{_verdict_cell(n)}<td>{paper}</td></tr>"
        )
    return head + "".join(rows) + "</tbody></table>"


def _diagnostics_list(view: TaskView) -> str:
    if not view.diagnostics:
        return ""
    items = []
    for d in view.diagnostics:
        share = f"{len(d.counted) / len(d.base):.1%}" if d.base else "n/a"
        value = f" (the run's {escape(d.metric)}: {_num(d.value, 4)})" if d.value is not None else ""
        items.append(
            f'<li><a class="diag" href="{_href(view.id, d=d.metric)}" data-diag="{escape(d.metric)}">'
            f"{share} {escape(d.label)}</a>: {len(d.counted)} of {len(d.base)} answers{value}</li>"
        )
    return (
        '<div class="diagnostics"><h5>Diagnostics (each links to the answers it counts)</h5><ul>'
        + "".join(items)
        + "</ul></div>"
    )


def _task_block(view: TaskView) -> str:
    docs = (
        f'<a href="{_href(view.id)}" class="docs">all {view.n_docs} documents</a>'
        if view.n_docs
        else "no logged samples"
    )
    return (
        f'<section class="task" id="task-{view.id}"><h4><code>{escape(view.task)}</code> '
        f'<span class="model">{escape(view.model)}</span> · {docs}</h4>'
        + _numbers_table(view)
        + _diagnostics_list(view)
        + "</section>"
    )


def _toc(views: dict[str, list[TaskView]]) -> str:
    rows = "".join(
        f'<tr><td><a href="#task-{v.id}">{escape(v.task)}</a></td><td>{escape(v.model)}</td><td>{v.n_docs}</td></tr>'
        for vs in views.values()
        for v in vs
    )
    return (
        '<nav aria-label="tasks"><h2>Tasks</h2><table class="toc"><thead><tr><th scope=col>task</th>'
        f"<th scope=col>model</th><th scope=col>documents</th></tr></thead><tbody>{rows}</tbody></table>"
        '<p><a href="#runs">Runs: model, backend, versions and flags of each run file</a></p></nav>'
    )


def _manifest_table(entries: list[dict[str, str]]) -> str:
    keys = list(dict.fromkeys(k for e in entries for k in e))
    head = "".join(f"<th scope=col>{escape(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(e.get(k, '–')))}</td>" for k in keys) + "</tr>" for e in entries)
    return (
        f'<div class="scroll"><table class="manifest"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    )


def _work_figure(section: Any, runs: dict[str, Run], ids: dict[tuple[str, str], str]) -> str:
    """The work's comparison figure (its report section's ``points``) as interactive SVG; each point links to its
    task's documents."""
    if not hasattr(section, "points"):
        return ""
    values = {short_label(m): section.points(r) for m, r in runs.items()}
    values = {m: v for m, v in values.items() if v}
    if not values:
        return ""
    labels = {short_label(m): m for m in runs}

    def link(model: str, metric: str) -> str | None:
        name, _, task = metric.rpartition(" ")
        task_id = ids.get((labels.get(model, model), task))
        return _href(task_id, m=name) if task_id and name else None

    refs = getattr(section, "POINT_REFS", None)
    ref = (lambda m: refs.get(m)) if isinstance(refs, dict) else refs
    chart = svg.forest(values, section.TITLE, link, ref, getattr(section, "POINT_REF_LABEL", "ideal"))
    caption = "Hover or focus a point for its value and 95% CI; click it for its documents."
    return f'<figure class="figure">{chart}<figcaption>{caption}</figcaption></figure>'


def _page(title: str, body: str, index: dict[str, Any], blobs: dict[str, str], mode: str) -> str:
    css = _asset("explorer.css")
    vendor = "\n".join(_script_text(_asset(f"vendor/{name}")) for name in VENDOR)
    data = "".join(
        f'<script type="application/x-gzip-base64" id="data-{tid}">{blob}</script>' for tid, blob in blobs.items()
    )
    index_json = _script_text(json.dumps(build.clean(index), ensure_ascii=False, allow_nan=False))
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{css}</style></head>"
        f'<body data-mode="{mode}"><a class="skip" href="#overview">Skip to the overview</a>'
        f'<div id="explorer" hidden></div><main id="overview">{body}</main>'
        '<noscript><p class="noscript">The numbers, verdicts and figures above read without JavaScript; the documents '
        "behind each number need it.</p></noscript>"
        f'<script type="application/json" id="explorer-index">{index_json}</script>{data}'
        f"<script>{vendor}</script><script>{_script_text(_asset('explorer.js'))}</script></body></html>\n"
    )


def _index_entry(view: TaskView) -> dict[str, Any]:
    return {
        "task": view.task,
        "model": view.model,
        "work": view.work,
        "n": view.n_docs,
        "numbers": {n.metric: {"value": n.value, "scope": n.scope, "outcome": n.outcome} for n in view.numbers},
    }


def run_views(runs: dict[str, Run], thresholds: dict[str, float] | None = None) -> dict[str, list[TaskView]]:
    """{model: [TaskView per task]}: every task of every run with its numbers, diagnostics and documents."""
    from bias_harness.report.verdicts import Verdicts

    out = {}
    for i, (model, run) in enumerate(runs.items()):
        checked = Verdicts(run, thresholds)
        out[model] = [build.task_view(run, t, checked, i) for t in run.tasks() if _has_numbers(run, t)]
    return out


def _has_numbers(run: Run, task: str) -> bool:
    """A task with results of its own (a group's aggregate rows are shown by its subtasks)."""
    return bool(run.sample_files.get(task)) or bool((run.configs.get(task) or {}).get("metric_list"))


def write_explorer(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    thresholds: dict[str, float] | None = None,
    title: str = "bias-harness results explorer",
) -> Path:
    """Write the explorer of ``run_dirs`` (one or more lm-eval output folders; several models side by side) to the
    file ``out``; returns its path."""
    from bias_harness.report.sections import section_name, sections
    from bias_harness.runs import load_runs

    runs = load_runs(*run_dirs)
    views = run_views(runs, thresholds)
    ids = {(m, v.task): v.id for m, vs in views.items() for v in vs}
    parts = [
        f"<header><h1>{escape(title)}</h1><p class=lede>Every headline number with its 95% CI and verdict; "
        "click a number for the documents behind it (prompt, answer, the parser rule that read it), a "
        "diagnostic for exactly the answers it counts.</p></header>"
    ]
    parts.append(_toc(views))
    shown: set[str] = set()
    for section in sections():
        mine = {m: [v for v in vs if section.matches(v.task)] for m, vs in views.items()}
        mine = {m: vs for m, vs in mine.items() if vs}
        if not mine:
            continue
        parts.append(f'<section class="work" id="work-{section_name(section)}"><h2>{escape(section.TITLE)}</h2>')
        parts.append(_work_figure(section, {m: runs[m] for m in mine}, ids))
        for model, vs in mine.items():
            if len(runs) > 1:
                parts.append(f"<h3>{escape(short_label(model))}</h3>")
            parts += [_task_block(v) for v in vs]
            shown.update(v.id for v in vs)
        parts.append("</section>")
    rest = [v for vs in views.values() for v in vs if v.id not in shown]
    if rest:
        parts.append('<section class="work" id="work-other"><h2>Other tasks</h2>')
        parts += [_task_block(v) for v in rest]
        parts.append("</section>")
    parts.append('<section id="runs"><h2>Runs: what made each number</h2>')
    parts += [_manifest_table(build.manifest(r)) for r in runs.values()]
    parts.append("</section>")
    parts.append("<footer><p>Written by <code>bias-harness report --html</code> (docs/explorer.md).</p></footer>")
    all_views = [v for vs in views.values() for v in vs]
    index = {"tasks": {v.id: _index_entry(v) for v in all_views}}
    blobs = {v.id: build.packed(v.rows, v.diagnostics) for v in all_views}
    return _write(out, _page(title, build.redacted("".join(parts)), build.redacted(index), blobs, "report"))


def _write(out: str | Path, text: str) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
