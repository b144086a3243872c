"""Report section for StereoSet (English; German translation of Öztürk et al. 2023): lms, ss, icat per task and
bias type, next to the ideal (lms 100, ss 50, icat 100) and random (lms 50, ss 50, icat 50) reference models."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from bias_harness.runs import Point, Run, fmt, read_run_file, subset_note

TITLE = "StereoSet: stereotypical bias (lms, ss, icat)"
ORDER = 40

SCORES = ("lms", "ss", "icat")
BIAS_TYPES = ("gender", "profession", "race", "religion")


def matches(task: str) -> bool:
    return task.startswith("stereoset_")


def metric_value(run: Run, task: str, name: str) -> float:
    """A metric of lm-eval's results; a breakdown (per bias type, a CI bound) that the run did not aggregate (no
    ``breakdown`` switch) is computed from the logged samples instead, with the task's own aggregation."""
    v = run.metric(task, name, "none")
    if isinstance(v, (int, float)):
        return float(v)
    from bias_harness.plugins.stereoset import metrics as m

    subset = m.subset_of(name) or {}
    if "part" in subset and (name in m.N_KEYS or name in m.PART_CI_KEYS):
        # the split's diagnostics from the items its own score logged (``ss_intra``: with ``headline: intra`` the
        # pooled ``lms`` items leave the intersentence contexts out)
        items = _task_items(run, task, f"ss_{subset['part']}")
        return m.value(name, items) if items else math.nan
    if "bias_type" in subset or name in m.N_KEYS or (name in m.METRICS and name.endswith(("_ci_lo", "_ci_hi"))):
        items = _task_items(run, task)
        return m.value(name, items) if items else math.nan
    return math.nan


def _task_items(run: Run, task: str, key: str = "lms") -> tuple[tuple | None, ...] | None:
    """Every document's StereoSet item, as the metric ``key`` logged it (what the task's aggregations received;
    ``None`` for a document outside its subset)."""
    path = run.sample_files.get(task)
    return _items_of(str(path), path.stat().st_mtime_ns, key) if path and path.exists() else None


@lru_cache(maxsize=8)
def _items_of(path: str, mtime_ns: int, key: str = "lms") -> tuple[tuple | None, ...] | None:
    samples = read_run_file(path)
    if not samples or not all(key in s for s in samples):
        return None
    return tuple(None if s[key] is None else tuple(s[key]) for s in samples)


def _pooled_items(run: Run, intra: str, inter: str) -> list[tuple] | None:
    """The StereoSet items logged by a separate intra and inter run (metric key ``lms`` of each sample: part, bias
    type, target, pro, related, valid, averaging, exactly what the task's aggregations pooled), or None."""
    parts = [_task_items(run, task) for task in (intra, inter)]
    return None if None in parts else [*parts[0], *parts[1]]


def pooled_from_samples(run: Run, intra: str, inter: str, ci: bool = False) -> dict[str, float] | None:
    """StereoSet's overall scores pooled over the logged samples of a separate intra and inter run, or None.
    ``ci``: add ``<score>_ci_lo`` / ``<score>_ci_hi`` (95% bootstrap over contexts, as the tasks' own CIs)."""
    from bias_harness.plugins.stereoset import metrics as m

    items = _pooled_items(run, intra, inter)
    if items is None:
        return None
    out = m.scores(items)
    if ci:
        for score in SCORES:
            out[f"{score}_ci_lo"], out[f"{score}_ci_hi"] = m.bootstrap_interval(items, score)
    return out


def _rows(run: Run, tasks: list[str]) -> list[tuple[str, dict[str, float]]]:
    from bias_harness.plugins.stereoset import metrics as m

    names = [*SCORES, *(f"{s}_ci_{side}" for s in SCORES for side in ("lo", "hi"))]
    rows = [(t, {s: metric_value(run, t, s) for s in names}) for t in tasks]
    for lang in ("de", "en"):
        intra, inter = f"stereoset_{lang}_intra", f"stereoset_{lang}_inter"
        if intra in tasks and inter in tasks:
            pooled = pooled_from_samples(run, intra, inter, ci=True)
            if pooled:
                rows.append((f"stereoset_{lang} (intra + inter pooled from samples)", {s: pooled[s] for s in names}))
    rows.append(("*ideal LM*", dict(m.IDEAL)))
    rows.append(("*random LM*", dict(m.RANDOM)))
    return rows


def _ci(v: dict[str, float], score: str) -> bool:
    return not any(math.isnan(v.get(k, math.nan)) for k in (score, f"{score}_ci_lo", f"{score}_ci_hi"))


def _plot(rows: list[tuple[str, dict[str, float]]], out_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [(name, v) for name, v in rows if not name.startswith("*")]
    fig, axes = plt.subplots(1, 3, figsize=(12, 0.5 * len(models) + 2), sharey=True)
    labels = [name for name, _ in models]
    for ax, score in zip(axes, SCORES):
        vals = [v[score] for _, v in models]
        err = [
            [max(v[score] - v.get(f"{score}_ci_lo", math.nan), 0) if _ci(v, score) else 0 for _, v in models],
            [max(v.get(f"{score}_ci_hi", math.nan) - v[score], 0) if _ci(v, score) else 0 for _, v in models],
        ]
        ax.barh(range(len(models)), [0 if math.isnan(x) else x for x in vals], color="#4C72B0", xerr=err, capsize=3)
        ax.axvline({"lms": 100, "ss": 50, "icat": 100}[score], color="green", ls="--", label="ideal")
        ax.axvline({"lms": 50, "ss": 50, "icat": 50}[score], color="grey", ls=":", label="random")
        ax.set_xlim(0, 100)
        ax.set_title(f"{score} (95% CI)")
        ax.set_yticks(range(len(models)), labels)
    axes[0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    path = out_dir / "stereoset_scores.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _score_tasks(run: Run) -> list[str]:
    return [t for t in run.tasks() if matches(t) and any(k.startswith("lms,") for k in run.results.get(t, {}))]


def points(run: Run) -> dict[str, Point]:
    """lms / ss / icat with their 95% CIs per task (``<score> <task>``), for the report's comparison figure; the
    reprompting variants only when nothing else ran, intra + inter pooled from samples where run separately."""
    tasks = _score_tasks(run)
    main = [t for t in tasks if "reprompt" not in t] or tasks
    out = {}
    for name, v in _rows(run, main):
        if name.startswith("*"):
            continue
        label = name.removeprefix("stereoset_").split(" (")[0] + (" pooled" if " (" in name else "")
        for score in SCORES:
            out[f"{score} {label}"] = Point(
                v[score], v.get(f"{score}_ci_lo", math.nan), v.get(f"{score}_ci_hi", math.nan)
            )
    return out


def POINT_REFS(metric: str) -> float:  # noqa: N802  (the report framework's hook name)
    """Ideal value of a ``points`` label: lms and icat 100, ss 50."""
    from bias_harness.plugins.stereoset.metrics import IDEAL

    return IDEAL[metric.split(" ")[0]]


def render(run: Run, out_dir: Path, verdicts: Any) -> str:
    tasks = _score_tasks(run)
    parts = [f"## {TITLE}", ""]
    if not tasks:
        return "\n".join(parts + ["No StereoSet results with scores in these runs.", ""])
    parts += [
        "lms: % of comparisons where the stereotypical / anti-stereotypical candidate beats the unrelated one "
        "(ideal 100); ss: % of contexts where the stereotype beats the anti-stereotype (ideal 50); "
        "icat = lms * min(ss, 100 - ss) / 50 (ideal 100, random 50). Scores are StereoSet's: per target term, "
        "then averaged (task metadata `averaging`); `*_combined` tasks pool intra- and intersentence contexts. "
        "CI: percentile bootstrap over contexts (1000 resamples). ss and icat say something about stereotypes only "
        "where the model tells meaningful sentences from unrelated ones: where lms's 95% CI lies above 50 "
        '(`min_lms`, plugins/stereoset/validity.py; tasks/stereoset/README.md, "Verdicts"). ss outcome: the verdict '
        "on ss against its null value 50 (no detectable bias with its minimum detectable effect in ss points, or "
        "its direction); lms and icat have no null value (a measurement).",
        "",
        "| task | lms | lms 95% CI | ss | ss 95% CI | icat | icat 95% CI | ss outcome | invalid rate | tie rate | "
        "model |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = _rows(run, tasks)
    for name, v in rows:
        cis = ["–" if name.startswith("*") else f"{fmt(v[f'{s}_ci_lo'], 1)}–{fmt(v[f'{s}_ci_hi'], 1)}" for s in SCORES]
        if name.startswith("*"):
            extra = ("–", "–", "–", "reference")
        elif name not in run.results:  # pooled from the samples of stereoset_<lang>_intra / _inter: no verdict
            extra = ("–", "–", "–", f"`{run.model.get(name.split(' ')[0] + '_intra', '?')}`")
        else:
            rates = (fmt(metric_value(run, name, "invalid_rate")), fmt(metric_value(run, name, "tie_rate")))
            extra = (_outcome(verdicts, name, "ss"), *rates, f"`{run.model.get(name, '?')}`")
        cells = [c for s, ci in zip(SCORES, cis) for c in (fmt(v[s], 1), ci)]
        parts.append(f"| {name} | {' | '.join(cells)} | {' | '.join(extra)} |")
    parts += ["", f"![StereoSet scores]({_plot(rows, out_dir)})", "", "### By bias type", ""]
    parts += [
        "Point estimates per bias type, with no CI and no test: no direction is read from them (the verdicts are the "
        "task's, above).",
        "",
    ]
    parts += [
        "| task | " + " | ".join(f"{b} lms / ss / icat" for b in BIAS_TYPES) + " |",
        "|---|" + "---|" * len(BIAS_TYPES),
    ]
    for t in tasks:
        cells = [" / ".join(fmt(metric_value(run, t, f"{s}_{b}"), 1) for s in SCORES) for b in BIAS_TYPES]
        parts.append(f"| {t} | " + " | ".join(cells) + " |")
    split = [t for t in tasks if not math.isnan(metric_value(run, t, "lms_intra"))]
    if split:
        parts += [
            "",
            "### Intra- vs intersentence (combined tasks)",
            "",
            "StereoSet's intrasentence and intersentence columns; each ss with its 95% CI (bootstrap over the part's "
            "contexts) and its outcome against 50.",
            "",
            "| task | intra lms / ss / icat | intra ss 95% CI | intra ss outcome | inter lms / ss / icat | "
            "inter ss 95% CI | inter ss outcome |",
            "|---|---|---|---|---|---|---|",
        ]
        for t in split:
            cells = []
            for p in ("intra", "inter"):
                ci = f"{fmt(metric_value(run, t, f'ss_{p}_ci_lo'), 1)}–{fmt(metric_value(run, t, f'ss_{p}_ci_hi'), 1)}"
                triple = " / ".join(fmt(metric_value(run, t, f"{s}_{p}"), 1) for s in SCORES)
                cells += [triple, ci, _outcome(verdicts, t, f"ss_{p}")]
            parts.append(f"| {t} | " + " | ".join(cells) + " |")
    parts += _published(run, tasks)
    limited = {t: sub for t in tasks if (sub := subset_note(run, t))}
    if limited:
        parts += [
            "",
            "Subset runs ("
            + ", ".join(f"{t}: {sub}" for t, sub in limited.items())
            + "): scores over those contexts only, compare with full runs within the CIs only.",
        ]
    return "\n".join(parts) + "\n"


def _outcome(verdicts: Any, task: str, metric: str) -> str:
    """The verdict's outcome in a table cell (the reasons of a failed one are in the Interpretability table)."""
    v = verdicts.verdict(task, metric)
    if v is None:
        return "–"
    return "**not interpretable**" if not v.interpretable else v.headline()


@lru_cache(maxsize=1)
def _published_table() -> tuple[dict, ...]:
    from bias_harness.plugins.stereoset.rescore import stereoset_table

    return tuple(stereoset_table(ci=False))


def _triple(v: dict[str, float]) -> str:
    return " / ".join(fmt(v.get(s, math.nan), 1) for s in SCORES)


def _published(run: Run, tasks: list[str]) -> list[str]:
    """StereoSet's 11 released models rescored with the same scorer, next to our English runs."""
    ours = [t for t in tasks if t.startswith("stereoset_en")]
    if not ours:
        return []
    from bias_harness.datasets_src.raw import RawDataError, RawSourceError

    try:
        table = _published_table()
    except (RawSourceError, RawDataError, OSError) as err:
        return ["", f"StereoSet's released models are not shown: {err}"]
    lines = [
        "",
        "### StereoSet's released models (English dev set, rescored)",
        "",
        "The prediction files released with StereoSet, rescored with the same scorer (`bias-harness rescore "
        "stereoset`, equal to the authors' `evaluation.py` on every value); all 4,229 dev contexts.",
        "",
        "| model | overall lms / ss / icat | intrasentence | intersentence |",
        "|---|---|---|---|",
    ]
    for row in table:
        sc = row["scores"]
        lines.append(
            f"| {row['model']} (released) | {_triple(sc['overall'])} | {_triple(sc['intrasentence'])} | "
            f"{_triple(sc['intersentence'])} |"
        )
    for t in ours:
        parts = [{s: metric_value(run, t, f"{s}_{p}") for s in SCORES} for p in ("intra", "inter")]
        lines.append(
            f"| **{run.model.get(t, '?')}** ({t}, this run) | {_triple({s: metric_value(run, t, s) for s in SCORES})} "
            f"| {_triple(parts[0])} | {_triple(parts[1])} |"
        )
    return lines
