"""The report page: the run table, then one section per work (per model with several), each followed by the
interpretability verdicts of its tasks; tasks no section claims go in a plain table at the end."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from bias_harness.redact import redact
from bias_harness.report import verdicts
from bias_harness.report.plots import section_figure
from bias_harness.report.sections import sections
from bias_harness.report.summary import fill_summary, read_summary, summary_for, with_summary
from bias_harness.runs import fmt, load_runs, short_label, subset_note

log = logging.getLogger(__name__)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60] or "model"


def _nest(markdown: str, title: str, subdir: str | None) -> str:
    """A section's Markdown under a per-model heading: drop its own title, demote headings, fix image links."""
    lines = markdown.rstrip().splitlines()
    if lines and lines[0].lstrip("#").strip() == title:
        lines = lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    out = []
    for line in lines:
        if line.startswith("#"):
            line = "#" + line
        if subdir:
            line = re.sub(r"(!\[[^\]]*\]\()(?![a-z]+://|/)([^)]+\))", rf"\g<1>{subdir}/\g<2>", line)
        out.append(line)
    return "\n".join(out)


def write_report(
    run_dirs: list[str | Path],
    out_dir: str | Path,
    summary: str | Path | None = None,
    thresholds: dict[str, float] | None = None,
    multiplicity: str = verdicts.DEFAULT_MULTIPLICITY,
) -> Path:
    """Write ``out_dir/README.md`` (+ plots): one section per work; with several models, one sub-section each.

    ``summary``: optional Markdown file (see :func:`read_summary`) with a hand-written paragraph per work.
    ``thresholds``: overrides of the interpretability thresholds (:mod:`bias_harness.plugins.validity`);
    ``multiplicity``: the p-value adjustment of the breakdown tables. One
    :class:`~bias_harness.report.verdicts.Verdicts` per run gives every verdict of the page: the sections' tables,
    the summaries and the Interpretability table that ends each section.
    """
    runs = load_runs(*run_dirs)
    checked = {m: verdicts.Verdicts(r, thresholds, multiplicity) for m, r in runs.items()}
    texts = read_summary(summary) if summary else {}
    notes = {k: fill_summary(v, runs, str(summary), verdicts=checked) for k, v in texts.items()}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# bias-harness report", ""]
    if notes.get(""):
        parts += [notes[""], ""]
    parts += ["| run file | model | model type (backend) |", "|---|---|---|"]
    parts += [
        f"| `{r.labels.get(p, p.name)}` | `{short_label(m)}` | {r.backends.get(p, '?')} |"
        for m, r in runs.items()
        for p in r.sources
    ]
    parts.append("")
    parts.append("Models: " + "; ".join(f"`{short_label(m)}`" for m in runs))
    limits = {(m, t): sub for m, r in runs.items() for t in r.limit if (sub := subset_note(r, t))}
    if limits:
        parts.append("")
        parts.append(
            "**Subset runs** (`--limit N`: the first N documents of a task; `--samples`: the listed documents): "
            + ", ".join(
                f"{t}: {sub}" + (f" ({short_label(m)})" if len(runs) > 1 else "")
                for (m, t), sub in sorted(limits.items())
            )
        )
    unsampled = sorted({t for r in runs.values() for t in r.tasks() if t not in r.sample_files})
    if unsampled:  # every number the report computes from the answers is "–" then: say why, once
        note = (
            f"**No per-answer tables for {', '.join(unsampled)}**: the run was made without `--log_samples`, so "
            "the breakdowns, diagnostics and verdicts computed from the answers show –; run it again with "
            "`--log_samples` (with `--use_cache`, no answer is asked again)."
        )
        log.warning("%s", note.replace("**", "").replace("`", ""))
        parts += ["", note]
    parts.append("")
    covered: dict[str, set[str]] = {m: set() for m in runs}
    for section in sections():
        present = {m: [t for t in r.tasks() if section.matches(t)] for m, r in runs.items()}
        present = {m: ts for m, ts in present.items() if ts}
        if not present:
            continue
        figure = section_figure(section, runs, list(present), out)
        if len(runs) == 1:
            ((model, tasks),) = present.items()
            covered[model].update(tasks)
            parts.append(
                with_summary(section.render(runs[model], out, checked[model]).rstrip(), summary_for(section, notes))
                + "\n"
            )
            if figure:
                parts.append(figure)
            parts.append(verdicts.markdown(checked[model], tasks))
            continue
        parts.append(with_summary(f"## {section.TITLE}", summary_for(section, notes)) + "\n")
        if figure:
            parts.append(figure)
        for model, tasks in present.items():
            covered[model].update(tasks)
            sub = _slug(short_label(model))
            (out / sub).mkdir(exist_ok=True)
            parts.append(f"### {short_label(model)}\n")
            parts.append(_nest(section.render(runs[model], out / sub, checked[model]), section.TITLE, sub) + "\n")
            parts.append(_nest(verdicts.markdown(checked[model], tasks), "", None))
    rest = [(m, t) for m, r in runs.items() for t in r.tasks() if t not in covered[m]]
    if rest:
        parts.append("## Other tasks\n")
        parts.append("| model | task | metric | value |\n|---|---|---|---|")
        for m, t in rest:
            for k, v in runs[m].results[t].items():
                if k != "alias" and not k.endswith("_stderr"):
                    parts.append(f"| {short_label(m)} | {t} | {k} | {fmt(v)} |")
    path = out / "README.md"
    path.write_text(redact("\n".join(parts) + "\n"), encoding="utf-8")
    return path
