"""Mitigation runs on the results page, and the before/after tables the model card shares with it.

A recorded run (``bias-harness mitigate ... --record-to docs/results``, :mod:`bias_harness.mitigation.record`) is one
folder ``docs/results/mitigation/<name>/``: ``mitigation.json`` (the recipe, the base model's key, the held-out
split with its sizes and counted overlap, the training summary, the command, and the manifest of every evaluation:
the recipe's own tasks and each side effect, before and after) and the manifests under ``runs/``, whose answers are
in the packs of ``docs/results/responses/`` like every other run on the page. The page's replay
(:mod:`bias_harness.report.replay`) replays both evaluations of each, compares them (``bias-harness compare``:
paired tests, both verdicts, what the change reads as) and writes the "Mitigation" section with :func:`section`.

Headline metrics are each task's ``metric_list`` (lm-eval's table); a run's result is a **reduction** where a
headline bias metric's change is significant and reads as a reduction of bias with both verdicts passing, else a
**negative result** (its numbers are shown all the same).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bias_harness.errors import BadInput, MissingInput
from bias_harness.plugins.paired import Comparison, MetricComparison
from bias_harness.report.compare import interpretable, p_text

FOLDER = "mitigation"
RECORD = "mitigation.json"
VERSION = 1
STAGES = ("before", "after")
_CI = ("_ci_lo", "_ci_hi", "_stderr")


# ---------------------------------------------------------------- records


def find(root: str | Path) -> list[Path]:
    """Every mitigation record under ``root/mitigation``, sorted."""
    return sorted((Path(root) / FOLDER).glob(f"*/{RECORD}"))


def read(path: str | Path) -> dict[str, Any]:
    """A record, checked: one error naming the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise MissingInput(f"no mitigation record {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise BadInput(f"{path}: not JSON ({e})") from None
    for key in ("mitigation_version", "name", "recipe", "model_key", "evaluations"):
        if key not in data:
            raise BadInput(f"{path}: field {key!r} missing")
    if data["mitigation_version"] != VERSION:
        raise BadInput(f"{path}: field 'mitigation_version' is {data['mitigation_version']!r}; this reads {VERSION}")
    for key, stages in evaluations(data).items():
        for stage in STAGES:
            if not (path.parent / stages.get(stage, "")).is_file():
                raise MissingInput(f"{path}: evaluation {key!r}: no {stage} manifest {stages.get(stage)!r}")
    return data


def evaluations(record: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{"main" or the side effect's task: {"before": manifest, "after": manifest}} (paths relative to the record)."""
    ev = record["evaluations"]
    return {"main": ev["main"], **{task: e for task, e in (ev.get("side_effects") or {}).items()}}


# ---------------------------------------------------------------- tables (the card's and the page's)


def headline(results_file: str | Path) -> dict[str, list[str]]:
    """task -> its headline metrics (``metric_list`` of the task config lm-eval wrote), CI bounds left out."""
    data = json.loads(Path(results_file).read_text(encoding="utf-8"))
    return {
        task: [m["metric"] for m in cfg.get("metric_list") or [] if not str(m.get("metric", "")).endswith(_CI)]
        for task, cfg in (data.get("configs") or {}).items()
    }


def headline_metrics(cmp: Comparison, heads: dict[str, list[str]]) -> list[MetricComparison]:
    """The comparison's headline metrics, in each task's ``metric_list`` order."""
    order = {(t, m): i for t, ms in heads.items() for i, m in enumerate(ms)}
    found = [m for m in cmp.metrics if (m.task, m.metric) in order]
    return sorted(found, key=lambda m: (m.task, order[m.task, m.metric], m.filter))


def _num(v: float | None) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def outcome_changed(m: MetricComparison) -> bool:
    """Both runs have a verdict and its outcome differs (bias -> no detectable bias, ... -> not interpretable)."""
    return m.verdict_a is not None and m.verdict_b is not None and m.verdict_a.outcome != m.verdict_b.outcome


def changes_table(metrics: list[MetricComparison], flag: bool = False) -> str:
    """Before, after, the paired difference and test, both verdicts and what the change reads as; ``flag``: a column
    that marks a verdict whose outcome changed."""
    head = "| task | metric | before | after | Δ [paired 95% CI] | p (test) | verdict before / after | reads as |"
    head += " outcome changed |" if flag else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for m in metrics:
        test = "McNemar" if m.p_mcnemar is not None else "bootstrap"
        line = (
            f"| {m.task} | {m.metric} | {_num(m.value_a)} | {_num(m.value_b)} | {m.diff:+.3f} "
            f"[{_num(m.ci_lo)}, {_num(m.ci_hi)}] | {p_text(m.p)} ({test}) | {interpretable(m.verdict_a)} / "
            f"{interpretable(m.verdict_b)} | {m.reads_as} |"
        )
        if flag:
            line += " **yes** |" if outcome_changed(m) else " no |"
        lines.append(line)
    return "\n".join(lines) if metrics else "_No headline metric to compare._"


def mde_table(metrics: list[MetricComparison]) -> str:
    """The minimum detectable effect of each headline bias metric (one with a test against its null value) in both
    evaluations: the smallest bias the evaluation's size and spread could detect (docs/validity.md)."""
    rows = [m for m in metrics if any(v is not None and v.test is not None for v in (m.verdict_a, m.verdict_b))]
    if not rows:
        return "_No headline bias metric with a test against its null value._"
    lines = ["| task | metric | units | MDE before | MDE after |", "|---|---|---|---|---|"]
    for m in rows:
        mdes = [v.test.mde if v is not None and v.test is not None else None for v in (m.verdict_a, m.verdict_b)]
        lines.append(f"| {m.task} | {m.metric} | {m.n_units:,} {m.unit} | {_num(mdes[0])} | {_num(mdes[1])} |")
    return "\n".join(lines)


def reductions(metrics: list[MetricComparison]) -> list[MetricComparison]:
    """Headline metrics whose significant change reads as a reduction of bias, both verdicts passing."""
    return [
        m
        for m in metrics
        if m.significant
        and (m.reads_as.startswith("reduction of bias") or m.reads_as.endswith(": reduced"))
        and all(v is not None and v.interpretable for v in (m.verdict_a, m.verdict_b))
    ]


def result(metrics: list[MetricComparison]) -> str:
    """The run's result in one line: the reductions, or a negative result."""
    found = reductions(metrics)
    if found:
        listed = "; ".join(f"`{m.task}` {m.metric} {m.value_a:.3f} -> {m.value_b:.3f} (p {p_text(m.p)})" for m in found)
        return f"**Reduction of bias** on held-out data: {listed}."
    return (
        "**Negative result:** no headline bias metric changed significantly as a reduction with both verdicts "
        "passing; the numbers are shown as measured."
    )


# ---------------------------------------------------------------- replayed records (the page's replay calls these)

Replay = Callable[[Path, Path], Path]  # (manifest, output folder) -> the replayed run's results file


def manifests_of(path: Path, only: str | None = None) -> dict[str, dict[str, Path]]:
    """{evaluation: {stage: manifest}} of the record ``path`` (``only``: that evaluation)."""
    return {
        key: {stage: path.parent / stages[stage] for stage in STAGES}
        for key, stages in evaluations(read(path)).items()
        if only is None or key == only
    }


def replay_record(path: Path, replay: Replay, out_root: Path, only: str | None = None) -> dict[str, dict[str, Path]]:
    """{evaluation: {stage: replayed results file}} of one record (``only``: that evaluation)."""
    out = out_root / path.parent.name
    return {key: {s: replay(m, out) for s, m in ms.items()} for key, ms in manifests_of(path, only).items()}


def replay_records(root: Path, replay: Replay, out_root: Path) -> list[dict[str, Any]]:
    """Every record of ``root`` replayed and compared: {"path" (relative to ``root``), "record", "files",
    "comparisons", "headline"} per record, what :func:`section`, :func:`numbers` and :func:`checks` read."""
    from bias_harness.report.compare import compare_runs

    out = []
    for path in find(root):
        files = replay_record(path, replay, out_root)
        out.append(
            {
                "path": path.relative_to(root).as_posix(),
                "record": read(path),
                "files": files,
                "comparisons": {k: compare_runs(f["before"].parent, f["after"].parent) for k, f in files.items()},
                "headline": {k: headline(f["after"]) for k, f in files.items()},
            }
        )
    return out


def numbers(runs: list[dict[str, Any]], run_numbers: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """numbers.json's "mitigation": record -> evaluation -> stage -> task -> metrics."""
    return {
        run["path"]: {k: {s: run_numbers(f) for s, f in stages.items()} for k, stages in run["files"].items()}
        for run in runs
    }


def checks(runs: list[dict[str, Any]], run_numbers: Callable[[Path], dict[str, Any]]) -> list[dict[str, Any]]:
    """One check per record: its evaluation with the fewest documents, both stages (numbers.json's
    "mitigation_checks")."""

    def docs(results: Path) -> int:
        counts = json.loads(results.read_text(encoding="utf-8")).get("n-samples", {})
        return sum(int(c.get("effective") or 0) for c in counts.values())

    out = []
    for run in runs:
        key = min(run["files"], key=lambda k: (docs(run["files"][k]["after"]), k))
        stages = run["files"][key]
        out.append(
            {"record": run["path"], "evaluation": key, "results": {s: run_numbers(f) for s, f in stages.items()}}
        )
    return out


# ---------------------------------------------------------------- the page section


def section(runs: list[dict[str, Any]], heading: str = "##") -> str:
    """The page's "Mitigation" section. ``runs``: per record {"path", "record", "comparisons": {key: Comparison},
    "headline": {key: {task: metrics}}} (the replay fills them)."""
    lines = [
        f"{heading} Mitigation",
        "",
        "Each recorded `bias-harness mitigate` run: the recipe's evaluation before and after training, on data the "
        "recipe did not train on (the split, its sizes and the overlap counted on the data), compared document by "
        "document (paired test, both verdicts, what the change reads as), and the other works' headline numbers on "
        "their small fixed subsets (side effects). Recorded with `bias-harness mitigate RECIPE ... --record-to "
        "docs/results`; replayed from the packs like every run above (docs/mitigation.md).",
        "",
    ]
    if not runs:
        return "\n".join([*lines, "_No mitigation run is recorded yet._", ""])
    for run in runs:
        lines += _run_section(run, heading + "#")
    return "\n".join(lines)


def _run_section(run: dict[str, Any], heading: str) -> list[str]:
    rec, cmps, heads = run["record"], run["comparisons"], run["headline"]
    main = headline_metrics(cmps["main"], heads["main"])
    held = rec.get("heldout") or {}
    training = ", ".join(f"{k} {v}" for k, v in (rec.get("training") or {}).items() if k in TRAINING_KEYS)
    out = [
        f"{heading} `{rec['recipe']}` on {rec['model_key']} (`{run['path']}`)",
        "",
        rec.get("summary", ""),
        "",
        result(main),
        "",
        f"- **Held-out evaluation:** {held.get('text', 'not declared by the recipe')}",
        f"- **Training:** {training or 'not recorded'}; data {rec.get('data_splits', {})}",
        f"- **Command:** `{rec.get('command', '')}`",
        "",
        changes_table(main),
        "",
        "Minimum detectable effects of the evaluation:",
        "",
        mde_table(main),
        "",
    ]
    failed = [
        f"`{m.task}` {m.metric} {stage} ({v.why()})"
        for m in main
        for stage, v in (("before", m.verdict_a), ("after", m.verdict_b))
        if v is not None and not v.interpretable
    ]
    if failed:
        out += ["Not interpretable as bias (docs/validity.md): " + "; ".join(failed) + ".", ""]
    side = [k for k in cmps if k != "main"]
    out += [f"{heading}# Side effects", ""]
    for task in side:
        metrics = headline_metrics(cmps[task], heads[task])
        why = (rec["evaluations"]["side_effects"].get(task) or {}).get("why", "")
        changed = sum(outcome_changed(m) for m in metrics)
        out += [f"`{task}`: {why}. Verdicts whose outcome changed: {changed}.", "", changes_table(metrics, True), ""]
    for task, why in (rec.get("side_effects_skipped") or {}).items():
        out.append(f"- `{task}` not run: {why}")
    return [*out, ""]


TRAINING_KEYS = ("global_step", "epoch", "loss_first_logged_step", "loss_last_logged_step", "reward_last_logged_step")
