"""Report section for the Contact Hypothesis tasks (Raj et al., AIES 2024): bias % per contact type, contact
effects, per-axis / scenario / principle tables and the axis x scenario heatmap (from the logged samples)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bias_harness.runs import Point, Run, fmt, metric_point

TITLE = "Contact Hypothesis: social bias under no, positive and negative contact"
ORDER = 20

CONTACTS = ("none", "positive", "negative")
GROUPS = ("contact", "contact_gen")

# Raj et al. 2024, Table 1 (bias %, no / positive / negative contact): their models, their prompts; orientation only.
PAPER_TABLE1 = {
    ("Llama 2", "certainty"): (27.47, 18.79, 37.95),
    ("Llama 2", "likelihood"): (49.99, 45.76, 49.86),
    ("Llama 2", "frequency"): (47.24, 49.45, 49.39),
    ("Tulu", "certainty"): (9.97, 4.28, 14.19),
    ("NousHermes", "certainty"): (32.44, 17.48, 42.81),
    ("Yi", "certainty"): (49.78, 45.86, 49.71),
}


def matches(task: str) -> bool:
    return (
        task in GROUPS or task.startswith("contact_") or task == "scd_heldout"
    )  # scd_heldout: bias-harness mitigate scd


_ITEMS: dict[tuple[str, str], list[list[Any]]] = {}


def _items(run: Run, task: str) -> list[list[Any]]:
    """Every logged doc's item ``[prompt_set_id, contact_type, biased]`` (``invalid_rate`` holds it for every doc;
    read once per samples file)."""
    key = (str(run.sample_files.get(task)), task)
    if key not in _ITEMS:
        if len(_ITEMS) > 8:
            _ITEMS.clear()
        _ITEMS[key] = [it for s in run.samples(task) if (it := s.get("invalid_rate") or s.get("bias_pct_none"))]
    return _ITEMS[key]


def _m(run: Run, task: str, name: str) -> Any:
    """Metric ``name`` of ``task`` from lm-eval's results; one the run did not put there (the bias % CIs are breakdown
    metrics, ``--metadata '{"breakdown": true}'``) from the logged samples, with the task's own aggregation."""
    value = run.metric(task, name)
    if value is not None or task in GROUPS or run.metric(task, "bias_pct_none") is None:
        return value
    from bias_harness.plugins.contact.metrics import METRIC_KEYS, summarize

    items = _items(run, task) if name in METRIC_KEYS else []
    return summarize(items)[name] if items else None


def points(run: Run) -> dict[str, Point]:
    """Bias % per contact type with its 95% CI per task (``bias % <contact> <task>``; the size-weighted groups have no
    CI and are left out), for the comparison figure; dashed: 50, a model that always answers Yes (or No)."""

    def point(t: str, k: str) -> Point:
        p = metric_point(run, t, k)
        if math.isnan(p.lo) and math.isnan(p.hi):  # the CIs: breakdown metrics, else from the samples
            lo, hi = (_m(run, t, f"{k}_ci_{end}") for end in ("lo", "hi"))
            p = Point(p.value, math.nan if lo is None else lo, math.nan if hi is None else hi)
        return p

    return {
        f"bias % {c} {t}": point(t, f"bias_pct_{c}")
        for t in run.tasks()
        if matches(t) and t not in GROUPS and _m(run, t, "bias_pct_none") is not None
        for c in CONTACTS
    }


POINT_REFS = lambda metric: 50.0  # noqa: E731
POINT_REF_LABEL = "50, always Yes or always No"


def sample_records(run: Run, task: str) -> list[dict[str, Any]]:
    """Doc fields + ``biased`` (1 / 0 / -1 invalid) of every logged sample (empty without --log_samples)."""
    out = []
    for s in run.samples(task):
        doc, item = s.get("doc") or {}, s.get("invalid_rate") or s.get("bias_pct_none")  # every doc's item
        if not doc or "contact_type" not in doc or not isinstance(item, (list, tuple)):  # not a contact sample
            continue
        out.append(
            {
                **{k: doc.get(k) for k in ("scale", "axis", "scenario", "principle", "contact_type", "action_type")},
                "biased": int(item[2]),
            }
        )
    return out


def _bar_plot(path: Path, task: str, values: list[float], cis: list[tuple[float, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vals = [0.0 if v is None or math.isnan(v) else v for v in values]
    err = [
        [0.0 if lo is None or math.isnan(lo) else max(0.0, v - lo) for v, (lo, _) in zip(vals, cis, strict=True)],
        [0.0 if hi is None or math.isnan(hi) else max(0.0, hi - v) for v, (_, hi) in zip(vals, cis, strict=True)],
    ]
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    ax.bar(range(3), vals, yerr=err, capsize=4, color=["#8c8c8c", "#55a868", "#c44e52"])
    ax.set_xticks(range(3), ["no contact", "positive", "negative"])
    ax.set_ylim(0, 100)
    ax.axhline(50, color="black", linewidth=0.6, linestyle=":")
    ax.set_ylabel("bias % (95% CI)")
    ax.set_title(f"{task}: bias % by contact type", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _heatmap(
    path: Path, task: str, table: dict[tuple, dict[str, float]], axes: list[str], scenarios: list[str]
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.array(
        [[table.get((a, s), {}).get("bias_pct_none", math.nan) for s in scenarios] for a in axes], dtype=float
    )
    fig, ax = plt.subplots(figsize=(1.2 * len(scenarios) + 3, 0.38 * len(axes) + 1.4))
    im = ax.imshow(grid, cmap="Reds", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(scenarios)), scenarios, rotation=20, ha="right")
    ax.set_yticks(range(len(axes)), [a.replace("_", " ") for a in axes])
    for i in range(len(axes)):
        for j in range(len(scenarios)):
            if not math.isnan(grid[i, j]):
                ax.text(
                    j,
                    i,
                    f"{grid[i, j]:.0f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if grid[i, j] < 60 else "white",
                )
    fig.colorbar(im, ax=ax, label="bias % (no contact)")
    ax.set_title(f"{task}: bias % by axis x scenario (no contact)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # keep the colour-bar label (cut off with one scenario column)
    plt.close(fig)


def _table(title: str, rows: dict[tuple, dict[str, float]]) -> list[str]:
    lines = [
        f"{title}:",
        "",
        "| | no contact | positive | negative | effect + | effect - | docs | invalid |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, r in rows.items():
        none, pos, neg = (r[f"bias_pct_{c}"] for c in CONTACTS)
        lines.append(
            f"| {' / '.join(str(k).replace('_', ' ') for k in key)} | {fmt(none, 1)} | {fmt(pos, 1)} | {fmt(neg, 1)} | "
            f"{fmt(pos - none, 1)} | {fmt(neg - none, 1)} | {r['n']} | {r['invalid']} |"
        )
    return lines + [""]


def _scoring(run: Run, task: str) -> str:
    """'; log-likelihood, normalize: token' for log-likelihood tasks (the option-length rule,
    tasks/contact/README.md)."""
    cfg = run.configs.get(task) or {}
    if cfg.get("output_type") != "multiple_choice":
        return ""
    rules = sorted({str((s.get("doc") or {}).get("option_norm_rule")) for s in run.samples(task)} - {"None"})
    rule = ", ".join(rules) or (cfg.get("metadata") or {}).get("normalize", "none")
    return f"; log-likelihood, option normalisation: {rule}"


def metric_value(run: Run, task: str, name: str) -> float | None:
    """A contact metric (breakdowns too) of ``task``, for the report's summary fields (:func:`_m`)."""
    value = _m(run, task, name)
    return float(value) if isinstance(value, (int, float)) else None


def rule_counts(run: Run, task: str) -> dict[str, int]:
    """Generated answers of the logged samples per parser rule (empty for log-likelihood tasks or without samples)."""
    from collections import Counter

    from bias_harness.plugins.contact.metrics import parse_answer_rule

    if (run.configs.get(task) or {}).get("output_type") != "generate_until":
        return {}
    counts: Counter[str] = Counter()
    for s in run.samples(task):
        doc, resps = s.get("doc") or {}, s.get("resps") or [[None]]
        if "options" in doc and resps[0] and isinstance(resps[0][0], str):
            counts[parse_answer_rule(resps[0][0], doc["options"])[1]] += 1
    return dict(counts)


def _validity(run: Run, task: str, verdicts: Any) -> list[str]:
    """Answer validity: valid answers and invalid share per contact type, the contact effects paired over the prompt
    sets answered validly under both conditions (with their McNemar test and outcome), the same-answer rate, the
    invalid share per scale, the parser rules."""
    from bias_harness.plugins.contact.metrics import ANSWER_RULES, INVALID_RULES, SCALES

    lines = [
        'Answer validity (plugins/contact/validity.py reads these; tasks/contact/README.md, "Verdicts"). The paired '
        "effect compares the same prompt sets with and without contact: discordant = the share of them whose two "
        "answers differ, McNemar p = the exact test on those (the paired effect's test; its MDE is in points).",
        "",
        "| contact | valid answers | invalid | effect (unpaired) | effect, paired | 95% CI (paired) | "
        "prompt sets paired | discordant | McNemar p | outcome (paired) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in CONTACTS:
        cells = [fmt(_m(run, task, f"n_valid_{c}"), 0), fmt(_m(run, task, f"invalid_rate_{c}"), 4)]
        if c == "none":
            cells += [""] * 7
        else:
            e = f"effect_{c}"
            cells += [
                fmt(_m(run, task, e), 2),
                fmt(_m(run, task, f"{e}_paired"), 2),
                f"[{fmt(_m(run, task, f'{e}_paired_ci_lo'), 2)}, {fmt(_m(run, task, f'{e}_paired_ci_hi'), 2)}]",
                fmt(_m(run, task, f"n_paired_{c}"), 0),
                fmt(_m(run, task, f"discordance_{c}"), 4),
                _p(_m(run, task, f"mcnemar_p_{c}")),
                _outcome(verdicts, task, f"{e}_paired"),
            ]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    scales = [sc for sc in SCALES if run.metric(task, f"invalid_rate_{sc}") is not None or _in_samples(run, task, sc)]
    same = fmt(_m(run, task, "same_answer_rate"), 4)
    lines += [
        "",
        f"Same answer to the inclusive and the avoidance question of an action pair: {same} (1: the answer "
        "ignores the action, and the bias % is 50 by construction; 0.5: random answers).",
    ]
    if len(scales) > 1:
        per_scale = ", ".join(f"{sc} {fmt(_m(run, task, f'invalid_rate_{sc}'), 4)}" for sc in scales)
        lines += [f"Invalid share per scale: {per_scale}."]
    counts = rule_counts(run, task)
    if counts:
        invalid = ", ".join(r for r in ANSWER_RULES if r in INVALID_RULES)
        lines += [
            "",
            f"Generated answers per parser rule (this version's `parse_answer_rule` on the logged answers; "
            f"invalid: {invalid}):",
            "",
            "| " + " | ".join(ANSWER_RULES) + " |",
            "|" + "---|" * len(ANSWER_RULES),
            "| " + " | ".join(str(counts.get(r, 0)) for r in ANSWER_RULES) + " |",
        ]
    return lines + [""]


def _p(value: Any) -> str:
    """p-values: 4 decimals, scientific below 0.001."""
    return f"{value:.2g}" if isinstance(value, float) and 0 < value < 1e-3 else fmt(value, 4)


def _outcome(verdicts: Any, task: str, metric: str) -> str:
    """The verdict's outcome in a table cell (the reasons of a failed one are in the Interpretability table)."""
    v = verdicts.verdict(task, metric)
    if v is None:
        return "–"
    return "**not interpretable**" if not v.interpretable else v.headline()


def _hypothesis(verdicts: Any, task: str) -> list[str]:
    """The Contact Hypothesis (RQ2) read from the paired effects' verdicts (``verdicts``: the report's): the direction
    in words where a bias (an effect) was detected, "no detectable bias (MDE x)" where the effect is within noise,
    else why the measurement failed (plugins/contact/validity.py)."""
    said = []
    for c in CONTACTS[1:]:
        v = verdicts.verdict(task, f"effect_{c}_paired")
        if v is not None:
            said.append(f"{c} contact: {v.direction if v.outcome == 'bias' else v.headline()}")
    if not said:
        return []
    return [
        "Contact Hypothesis (RQ2: positive contact lowers, negative contact raises bias), from the paired effects: "
        + "; ".join(said)
        + ".",
        "",
    ]


def _in_samples(run: Run, task: str, scale: str) -> bool:
    return any(len(it) > 3 and it[3] == scale for it in _items(run, task))


def _render_task(run: Run, task: str, out_dir: Path, verdicts: Any) -> list[str]:
    from bias_harness.plugins.contact.metrics import breakdown

    n = run.n_samples.get(task, {}).get("effective", "?")
    lines = [
        f"### `{task}`",
        "",
        f"Model: `{run.model.get(task, '?')}`; prompts: {n}"
        + (f" (`--limit {run.limit[task]}`)" if run.limit.get(task) else "")
        + _scoring(run, task)
        + ".",
        "",
    ]
    lines += [
        "Outcome: the verdict of `plugins/contact/validity.py` (a bias % is a measurement with no null value: "
        "interpretable where valid; an effect is tested against 0: no detectable bias with its minimum detectable "
        'effect in points, or its direction; tasks/contact/README.md, "Verdicts").',
        "",
        "| | bias % | 95% CI | outcome |",
        "|---|---|---|---|",
    ]
    for c in CONTACTS:
        k = f"bias_pct_{c}"
        lines.append(
            f"| {c} contact | {fmt(_m(run, task, k), 2)} | [{fmt(_m(run, task, k + '_ci_lo'), 2)}, "
            f"{fmt(_m(run, task, k + '_ci_hi'), 2)}] | {_outcome(verdicts, task, k)} |"
        )
    for k, label in (
        ("effect_positive", "effect of positive contact (positive - none)"),
        ("effect_negative", "effect of negative contact (negative - none)"),
    ):
        lines.append(
            f"| {label} | {fmt(_m(run, task, k), 2)} | [{fmt(_m(run, task, k + '_ci_lo'), 2)}, "
            f"{fmt(_m(run, task, k + '_ci_hi'), 2)}] | {_outcome(verdicts, task, k)} |"
        )
    lines += [
        f"| invalid answers (share of prompts, left out of the bias %) | {fmt(_m(run, task, 'invalid_rate'), 4)} | | |",
        "",
    ]
    lines += _validity(run, task, verdicts)
    lines += _hypothesis(verdicts, task)
    stem = task.replace("/", "_")
    bar = out_dir / f"{stem}_bias_by_contact.png"
    _bar_plot(
        bar,
        task,
        [_m(run, task, f"bias_pct_{c}") for c in CONTACTS],
        [(_m(run, task, f"bias_pct_{c}_ci_lo"), _m(run, task, f"bias_pct_{c}_ci_hi")) for c in CONTACTS],
    )
    lines += [f"![bias % by contact type]({bar.name})", ""]

    recs = sample_records(run, task)
    if not recs:
        return lines + ["Breakdowns by axis, scenario and principle need the samples: run with `--log_samples`.", ""]
    lines += [
        "Breakdowns by scale, axis, scenario and principle: point estimates from the logged samples, with no CI and no "
        "test, so no direction is read from them (the verdicts above are the task's).",
        "",
    ]
    if len({r["scale"] for r in recs}) > 1:
        lines += _table("By scale", breakdown(recs, ["scale"]))
    axis_rows = breakdown(recs, ["axis"])
    lines += _table("By bias dimension (HolisticBias axis)", axis_rows)
    lines += _table("By scenario", breakdown(recs, ["scenario"]))
    lines += _table("By contact principle", breakdown(recs, ["principle"]))
    cells = breakdown(recs, ["axis", "scenario"])
    axes = sorted({a for a, _ in cells})
    scenarios = [
        s for s in ("community", "education", "healthcare", "sports", "workplace") if any(k[1] == s for k in cells)
    ]
    heat = out_dir / f"{stem}_axis_scenario.png"
    _heatmap(heat, task, cells, axes, scenarios)
    lines += [
        "Axis x scenario, no-contact bias % (the layout of the paper's Tables 3-8):",
        "",
        "| axis | " + " | ".join(scenarios) + " |",
        "|---|" + "---|" * len(scenarios),
    ]
    for a in axes:
        lines.append(
            f"| {a.replace('_', ' ')} | "
            + " | ".join(fmt(cells.get((a, s), {}).get("bias_pct_none"), 1) for s in scenarios)
            + " |"
        )
    lines += ["", f"![axis x scenario heatmap]({heat.name})", ""]
    return lines


def render(run: Run, out_dir: Path, verdicts: Any) -> str:
    out_dir = Path(out_dir)
    lines = [
        f"## {TITLE}",
        "",
        "Bias % = share of answers that endorse avoiding the group (the negative option for an inclusive action, the "
        "affirmative one for an avoidance action), both action phrasings pooled: 0 = never biased; a model that always "
        "answers Yes (or always No) scores 50. CIs: 95% bootstrap over prompt sets.",
        "",
    ]
    for group in GROUPS:
        if group in run.results:
            lines += [
                f"Group `{group}` (size-weighted mean over its scale tasks):",
                "",
                "| no contact | positive | negative | effect + | effect - | invalid |",
                "|---|---|---|---|---|---|",
                "| "
                + " | ".join(
                    fmt(_m(run, group, k), 2)
                    for k in (
                        "bias_pct_none",
                        "bias_pct_positive",
                        "bias_pct_negative",
                        "effect_positive",
                        "effect_negative",
                        "invalid_rate",
                    )
                )
                + " |",
                "",
            ]
    for task in [t for t in run.tasks() if matches(t) and t not in GROUPS]:
        lines += _render_task(run, task, out_dir, verdicts)
    lines += [
        "**Paper reference** (Raj et al. 2024, Table 1; their models and their (unpublished) templates, not ours):",
        "",
        "| model (paper) | scale | no contact | positive | negative |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {m} | {s} | {a} | {b} | {c} |" for (m, s), (a, b, c) in PAPER_TABLE1.items()]
    return "\n".join(lines) + "\n"
