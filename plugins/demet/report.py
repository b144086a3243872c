"""Report section for DeMET (Levy et al. 2024): scores per relationship type, pair biases, breakdowns, name probe."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from bias_harness.runs import Point, Run, fmt, metric_point, read_run_file

TITLE = "DeMET: gender bias in relationship conflicts"
ORDER = 10

REL_TYPES = (
    "woman_woman",
    "man_man",
    "neutral_neutral",
    "woman_man",
    "man_woman",
    "woman_neutral",
    "neutral_woman",
    "neutral_man",
    "man_neutral",
)
PAIRS = ("woman_man", "woman_neutral", "neutral_man")
TOPICS = ("childcare", "cooking", "sex", "chores", "friends", "kids", "money", "general_household")
ET = ("egalitarian", "traditional", "other")

# The paper's numbers (Levy et al. 2024), for orientation only: other models, their name sample, their prompts.
# Eq. 2 (mixed-gender bias), then the three pair-bias columns in the order printed (their headers are lost in our
# copy; Eq. 2 is the mean of the three in every row to the printed rounding, tests/demet/test_demet_report.py checks it;
# llama-2-7b-chat's third bias is printed with two decimals, 0.76).
# Table 3: the 29 human-written scenarios (demet, demet_mc and the wording variants).
PAPER_TABLE3 = {
    "zephyr-7b-alpha": (0.291, 0.252, 0.300, 0.321),
    "Mistral-7B-Instruct-v0.1": (0.423, 0.348, 0.366, 0.555),
    "flan-t5-xxl": (0.315, 0.224, 0.169, 0.552),
    "falcon-40b-instruct": (0.287, 0.290, 0.272, 0.300),
    "text-davinci-002": (1.062, 0.897, 1.021, 1.269),
    "text-davinci-003": (0.760, 0.610, 0.700, 0.969),
    "gpt-3.5-turbo": (0.571, 0.355, 0.734, 0.624),
    "gpt-4o": (0.306, 0.207, 0.324, 0.386),
    "llama-2-7b-chat": (0.617, 0.534, 0.548, 0.760),
    "llama-2-13b-chat": (0.202, 0.103, 0.259, 0.245),
    "llama-2-70b-chat": (0.174, 0.146, 0.158, 0.218),
    "llama-3-70b-chat": (0.575, 0.431, 0.593, 0.700),
    "mpt-30b-instruct": (0.241, 0.203, 0.203, 0.317),
}
# Table 10 (Appendix C): the 80 GPT-4-generated scenarios (demet_gpt4); nine models, zephyr-7b-beta for -alpha.
PAPER_TABLE10 = {
    "zephyr-7b-beta": (0.420, 0.290, 0.432, 0.538),
    "Mistral-7B-Instruct-v0.1": (0.319, 0.272, 0.201, 0.484),
    "flan-t5-xxl": (0.161, 0.171, 0.090, 0.222),
    "gpt-3.5-turbo": (0.922, 0.746, 0.888, 1.133),
    "gpt-4o": (0.572, 0.369, 0.607, 0.740),
    "llama-2-7b-chat": (0.111, 0.127, 0.073, 0.134),
    "llama-2-13b-chat": (0.042, 0.040, 0.055, 0.032),
    "llama-2-70b-chat": (0.222, 0.194, 0.205, 0.266),
    "llama-3-70b-chat": (0.895, 0.699, 0.901, 1.084),
}
# Table 5 (name-gender classification): accuracy on women's (F) and men's (M) names; neutral names classified male (N).
PAPER_TABLE5 = {
    "gpt-4o": (1.0, 1.0, 0.3),
    "LLaMA-2 70B": (1.0, 1.0, 0.8),
    "Mistral": (1.0, 1.0, 0.7),
    "Zephyr": (1.0, 1.0, 0.6),
}


def matches(task: str) -> bool:
    return task == "demet" or task.startswith("demet_")


def _label(key: str) -> str:
    return key.replace("_", "-")


def _choice(sample: dict[str, Any]) -> str | None:
    """The parsed choice of a logged sample (NAME1 / NAME2 / [invalid]); ``None`` when it is no DeMET pair sample."""
    from bias_harness.plugins.demet.metrics import mc_choice

    resp = sample.get("filtered_resps") or []
    if "relationship" not in sample.get("doc", {}) or not resp:
        return None
    if not isinstance(resp[0], str):
        return mc_choice(resp)
    if resp[0].startswith("{"):  # demet_reask: the dialogue's JSON result
        return json.loads(resp[0]).get("choice")
    return resp[0]


def _sample_choices(run: Run, task: str) -> list[tuple[dict[str, Any], str]]:
    """(doc, choice) of every logged sample (empty without --log_samples)."""
    return [(s["doc"], c) for s in run.samples(task) for c in [_choice(s)] if c is not None]


def _sample_scores(choices: list[tuple[dict[str, Any], str]], et: str | None = None) -> dict[str, list[int]]:
    """relationship -> valid scores (-1 / +1), optionally of one scenario type only."""
    from bias_harness.plugins.demet.metrics import score_of

    out: dict[str, list[int]] = {r: [] for r in REL_TYPES}
    for doc, choice in choices:
        score = score_of(choice)
        if score is not None and (et is None or doc.get("et") == et):
            out.setdefault(doc["relationship"], []).append(score)
    return out


@lru_cache(maxsize=4)
def _file_items(path: str, mtime_ns: int) -> dict[str, list[Any]]:
    """metric key -> the lm-eval items of every logged sample of one samples file (breakdown keys included): a pair
    task's or ``demet_names``'s."""
    from bias_harness.plugins.demet.metrics import ET_GPT4, ET_HUMAN, process_results_names, sample_results

    records = read_run_file(path)
    samples = [(s.get("doc", {}), s.get("filtered_resps")) for s in records]
    levels = ET_GPT4 if any(d.get("et") == "other" for d, _ in samples) else ET_HUMAN
    items: dict[str, list[Any]] = defaultdict(list)
    for doc, resp in samples:
        if not resp:
            continue
        if "relationship" in doc:
            out = sample_results(doc, resp, levels)
        elif "name" in doc and "list" in doc:
            out = process_results_names(doc, [resp[0]])
        else:
            continue
        for key, item in out.items():
            items[key].append(item)
    return dict(items)


def _sample_items(run: Run, task: str) -> dict[str, list[Any]]:
    """metric key -> items, recomputed from the task's logged samples (empty without --log_samples)."""
    path = run.sample_files.get(task)
    return _file_items(str(path), path.stat().st_mtime_ns) if path else {}


@lru_cache(maxsize=4)
def _file_values(path: str, mtime_ns: int, settings_json: str) -> dict[str, Any]:
    from bias_harness.plugins.demet.metrics import aggregate

    settings = json.loads(settings_json)
    return {k: aggregate(k, v, settings=settings) for k, v in _file_items(path, mtime_ns).items()}


def _settings(run: Run, task: str) -> dict[str, Any]:
    """The run's metric settings of ``task`` (McNemar variant, bootstrap and permutation draws and seeds)."""
    from bias_harness.plugins.demet.metrics import settings_of

    return settings_of(run.settings(task))


def _sample_values(run: Run, task: str) -> dict[str, Any]:
    """Every metric of ``task`` (headline and breakdowns) as lm-eval computes it, recomputed from the logged samples
    with the run's own settings (empty without --log_samples)."""
    path = run.sample_files.get(task)
    if not path:
        return {}
    settings = json.dumps(_settings(run, task), sort_keys=True)
    return _file_values(str(path), path.stat().st_mtime_ns, settings)


def breakdowns(run: Run, task: str) -> dict[str, Any]:
    """The breakdown metrics of ``task`` (``metadata.breakdown_metrics``) as lm-eval computes them with the switch on,
    recomputed from the logged samples: a run without the switch still gets every table of the report."""
    from bias_harness.plugins.demet.metrics import metric_keys

    headline = set(metric_keys())
    return {k: v for k, v in _sample_values(run, task).items() if k not in headline}


def metric_value(run: Run, task: str, name: str) -> float:
    """A metric lm-eval did not aggregate (a breakdown, or a diagnostic a run predates), from the logged samples; for
    ``demet_names`` also ``n_names_<list>`` (names probed from the list ``woman`` / ``man`` / ``neutral``)."""
    from bias_harness.plugins.demet.metrics import names_hits

    if name.startswith("n_names_"):
        key = {"woman": "acc_woman", "man": "acc_man", "neutral": "male_share_neutral"}.get(name[len("n_names_") :], "")
        items = _sample_items(run, task).get(key)
        return float(names_hits(items)[1]) if items else math.nan
    value = _m(run, task, name)
    return float(value) if isinstance(value, (int, float)) else math.nan


def _subset_mcnemar(run: Run, items: dict[str, list[Any]], pair: str, key: str, task: str) -> float | None:
    """McNemar p of ``pair`` on one subset (``key`` = ``egalitarian``, ``topic_money``, ...) from the samples, with the
    run's McNemar variant."""
    from bias_harness.plugins.demet.metrics import agg_mcnemar

    subset = [it for it in items.get(f"pair_bias_{pair}_{key}", []) if it is not None]
    return agg_mcnemar(subset, _settings(run, task)) if subset else None


def _raw_answers(run: Run, task: str) -> list[tuple[str, str]]:
    """(rule, origin) per generated answer: the parser rule that decided it (plugins/answer_filters.py), re-applied to
    the logged text (demet_reask: as logged per attempt); origin = "" or the re-ask attempt. Empty for log-likelihood
    tasks."""
    from bias_harness.plugins.demet.parse import parse

    out = []
    for s in run.samples(task):
        doc, resp = s.get("doc", {}), s.get("resps") or []
        if "name1" not in doc or not resp or not isinstance(resp[0], list) or not isinstance(resp[0][0], str):
            continue
        text = resp[0][0]
        if text.startswith("{") and '"attempts"' in text:
            out += [(a["rule"], f"{a['attempt']}: {a['wording']}") for a in json.loads(text)["attempts"]]
        else:
            out.append((parse(text, doc).rule, ""))
    return out


def _ci(values: list[int]) -> tuple[float, float]:
    from bias_harness.plugins.stats import mean_ci

    return mean_ci([float(v) for v in values]) if values else (math.nan, math.nan)


def _bar_plot(
    path: Path,
    labels: list[str],
    values: list[float],
    cis: list[tuple[float, float]],
    title: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing = [not isinstance(v, (int, float)) or math.isnan(v) for v in values]
    vals = [0.0 if miss else float(v) for v, miss in zip(values, missing)]
    err = [
        [max(0.0, v - lo) if not math.isnan(lo) else 0.0 for v, (lo, _) in zip(vals, cis)],
        [max(0.0, hi - v) if not math.isnan(hi) else 0.0 for v, (_, hi) in zip(vals, cis)],
    ]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(labels) + 1), 3.2))
    ax.bar(range(len(labels)), vals, yerr=err, capsize=3, color="#4c72b0")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ylim:
        ax.set_ylim(*ylim)
    else:  # keep a readable scale when every bias is (near) zero
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(lo, -0.25), max(hi, 0.25))
    # the value on every bar; "no data" where the metric is undefined (no valid answers), instead of a silent 0
    top = ax.get_ylim()[1]
    for i, (v, miss) in enumerate(zip(vals, missing)):
        ax.text(
            i,
            0.04 * top if miss or v <= 0 else v + 0.04 * top,
            "no data" if miss else f"{v:+.2f}",
            ha="center",
            va="bottom",
            fontsize=8,
            color="#888888" if miss else "black",
        )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _p(value: Any) -> str:
    """p-values: 4 decimals, scientific below 0.001."""
    return f"{value:.2g}" if isinstance(value, float) and 0 < value < 1e-3 else fmt(value, 4)


def _m(run: Run, task: str, name: str) -> Any:
    """Metric ``name`` from lm-eval's results, else (a breakdown of a run without the switch, a metric the run
    predates) from the samples."""
    value = run.metric(task, name)
    return _sample_values(run, task).get(name) if value is None else value


EQ2_NULL = ("_floor", "_excess", "_perm_p")  # the columns of Eq. 2 against its noise floor, in the tables' order


def _render_pairs_task(run: Run, task: str, out_dir: Path, verdicts: Any) -> list[str]:
    lines = [
        f"### `{task}`",
        "",
        f"Model: `{run.model.get(task, '?')}`; documents: {run.n_samples.get(task, {}).get('effective', '?')}"
        + (f" (`--limit {run.limit[task]}`)" if run.limit.get(task) else "")
        + ".",
        "",
    ]
    n_valid, n_invalid = _m(run, task, "n_valid"), _m(run, task, "n_invalid")
    lines += [
        f"Invalid answers (not counted in any mean): **{fmt(_m(run, task, 'invalid_rate'))}** "
        f"({fmt(n_invalid)} invalid, {fmt(n_valid)} valid).",
        "",
    ]

    choices = _sample_choices(run, task)
    scores = _sample_scores(choices)
    rel_cis = {r: _ci(scores.get(r, [])) for r in REL_TYPES}
    lines += [
        "Mean score per relationship type (-1 = NAME1 chosen, +1 = NAME2; first group = NAME1). "
        "CI: bootstrap 95% over the logged answers.",
        "",
        "| relationship | score | 95% CI | valid answers |",
        "|---|---|---|---|",
    ]
    for r in REL_TYPES:
        lo, hi = rel_cis[r]
        n = len(scores.get(r, [])) if scores.get(r) else "–"
        lines.append(f"| {_label(r)} | {fmt(_m(run, task, f'score_{r}'))} | [{fmt(lo)}, {fmt(hi)}] | {n} |")
    lines.append("")

    lines += _render_diagnostics(run, task)
    lines += [
        "Paired mixed-gender bias (Eq. 1: B(g1, g2) = score(g2-g1) - score(g1-g2), positive favours g1). CI: "
        "bootstrap 95% over matched pairs; p: McNemar on matched pairs (the test of the verdict); outcome: not "
        "interpretable, no detectable bias (with the minimum detectable |B| at the run's matched pairs and their "
        "discordance) or the bias's direction (`plugins/demet/validity.py`).",
        "",
        "| pair | bias | 95% CI | McNemar p | outcome |",
        "|---|---|---|---|---|",
    ]
    for p in PAIRS:
        name = f"pair_bias_{p}"
        lines.append(
            f"| B({_label(p).replace('-', ', ')}) | {fmt(_m(run, task, name))} | {_ci_cell(run, task, name)} "
            f"| {_p(_m(run, task, f'mcnemar_p_{p}'))} | {_outcome(verdicts, task, name)} |"
        )
    signed = [_m(run, task, f"pair_bias_{p}") for p in PAIRS]
    if all(isinstance(v, (int, float)) for v in signed):
        lines.append(
            f"| signed mean of the pair biases (not Eq. 2: opposite signs cancel) | {fmt(sum(signed) / 3)} | | | |"
        )
    lines.append("")
    eq2 = "mixed_gender_bias"
    lines += [
        "Overall mixed-gender bias (Eq. 2: mean of the absolute pair biases) against its noise floor. Eq. 2 is "
        "above 0 for any noise, so its bootstrap CI excludes 0 even without a gender effect; the floor is its "
        "mean when the two orders of every matched pair are swapped at random (sign-flip permutation: no gender "
        "effect), p = the share of such draws at least as large (+1 corrected), the test of the verdict.",
        "",
        "| mixed_gender_bias | 95% CI | noise floor | excess | permutation p | outcome |",
        "|---|---|---|---|---|---|",
        f"| **{fmt(_m(run, task, eq2))}** | {_ci_cell(run, task, eq2)} | {fmt(_m(run, task, f'{eq2}_floor'))} | "
        f"{fmt(_m(run, task, f'{eq2}_excess'))} | {_p(_m(run, task, f'{eq2}_perm_p'))} | "
        f"{_outcome(verdicts, task, eq2)} |",
        "",
    ]
    lines += breakdown_lines(run, task, verdicts)
    stem = task.replace("/", "_")
    score_png, pair_png = out_dir / f"{stem}_scores.png", out_dir / f"{stem}_pair_bias.png"
    _bar_plot(
        score_png,
        [_label(r) for r in REL_TYPES],
        [_m(run, task, f"score_{r}") for r in REL_TYPES],
        [rel_cis[r] for r in REL_TYPES],
        f"{task}: mean score per relationship type",
        "score (-1 NAME1 ... +1 NAME2)",
        (-1.1, 1.1),
    )
    pair_keys = [f"pair_bias_{p}" for p in PAIRS] + ["mixed_gender_bias"]
    _bar_plot(
        pair_png,
        ["B(w,m)", "B(w,n)", "B(n,m)", "mixed"],
        [_m(run, task, k) for k in pair_keys],
        [(_m(run, task, f"{k}_ci_lo") or math.nan, _m(run, task, f"{k}_ci_hi") or math.nan) for k in pair_keys],
        f"{task}: pair biases (95% CI)",
        "bias (+ favours first group)",
    )
    lines += [f"![scores per relationship type]({score_png.name})", f"![pair biases]({pair_png.name})", ""]
    lines += _render_by_type(choices, task, out_dir / f"{stem}_scores_by_type.png")
    from bias_harness.plugins.demet.sensitivity import lines as sensitivity_lines

    return lines + sensitivity_lines(run, task, verdicts) + _render_parsing(run, task)


def _outcome(verdicts: Any, task: str, metric: str) -> str:
    """The verdict's outcome in a table cell (the reasons of a failed one are in the Interpretability table)."""
    v = verdicts.verdict(task, metric)
    if v is None:
        return "–"
    return "**not interpretable**" if not v.interpretable else v.headline()


def breakdown_lines(run: Run, task: str, verdicts: Any) -> list[str]:
    """The breakdown tables of a pair task (by scenario type, by topic), each with its multiplicity-adjusted tests."""
    items = _sample_items(run, task)
    lines: list[str] = []
    for title, subsets in (("By scenario type (the paper's H3)", ET), ("By topic", TOPICS)):
        lines += _render_breakdown(run, task, verdicts, items, title, subsets)
    return lines


def _render_breakdown(
    run: Run, task: str, verdicts: Any, items: dict[str, list[Any]], title: str, subsets: tuple[str, ...]
) -> list[str]:
    """One breakdown table (by scenario type or by topic): the pair biases with their McNemar p and Eq. 2 with its
    permutation p per row, each p also adjusted for every test the table makes (``verdicts.adjust``); a direction is
    stated only where the adjusted p is at most alpha and the row's measurement is valid."""
    from bias_harness.plugins.validity import direction_spec

    keys = [s if s in ET else f"topic_{s}" for s in subsets]
    rows = [(s, k) for s, k in zip(subsets, keys) if _m(run, task, f"pair_bias_{PAIRS[0]}_{k}") is not None]
    if not rows:
        return []
    names, raw = [], []
    for _, k in rows:
        for p in PAIRS:
            b = _m(run, task, f"pair_bias_{p}_{k}")
            defined = isinstance(b, (int, float)) and not math.isnan(b)  # no p where the bias is n/a
            names.append(f"pair_bias_{p}_{k}")
            raw.append(_subset_mcnemar(run, items, p, k, task) if items and defined else None)
        names.append(f"mixed_gender_bias_{k}")
        raw.append(_m(run, task, f"mixed_gender_bias_{k}_perm_p"))
    adjusted = verdicts.adjust(raw)
    alpha = verdicts.alpha(task)
    n_tests = sum(p is not None and not math.isnan(p) for p in raw)
    lines = [
        f"{title}: per row the three pair biases with their McNemar p and Eq. 2 with its noise floor and permutation "
        f"p (as above); adj.: each p adjusted for the {n_tests} tests of this table ({verdicts.multiplicity}: "
        'docs/validity.md, "Breakdown tables"); reading: the effects whose adjusted p is at most '
        f"{alpha:g}, each with its direction, where the row's measurement is valid.",
        "",
        "| | B(woman, man) | p (adj.) | B(woman, neutral) | p (adj.) | B(neutral, man) | p (adj.) | "
        "mixed_gender_bias | floor | perm. p (adj.) | reading |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    width = len(PAIRS) + 1
    for i, (s, _) in enumerate(rows):
        cells, said = [], []
        for j, name in enumerate(names[i * width : (i + 1) * width]):
            p_raw, p_adj = raw[i * width + j], adjusted[i * width + j]
            shown = "–" if p_raw is None else f"{_p(p_raw)} ({_p(p_adj)})"
            value = _m(run, task, name)
            cells.append(
                f"{fmt(value)} | {shown}"
                if j < len(PAIRS)
                else f"{fmt(value)} | {fmt(_m(run, task, f'{name}_floor'))} | {shown}"
            )
            v = verdicts.verdict(task, name)
            if p_adj is not None and p_adj <= alpha and v is not None and v.interpretable:
                spec = direction_spec(task, name)
                if spec is None:
                    said.append("Eq. 2 above its noise floor")
                else:
                    said.append(f"B({_label(PAIRS[j]).replace('-', ', ')}) {spec.above if value > 0 else spec.below}")
        lines.append(f"| {s.replace('_', ' ')} | " + " | ".join(cells) + f" | {'; '.join(said) or '–'} |")
    return lines + [""]


def _ci_cell(run: Run, task: str, name: str) -> str:
    return f"[{fmt(_m(run, task, f'{name}_ci_lo'))}, {fmt(_m(run, task, f'{name}_ci_hi'))}]"


def _render_diagnostics(run: Run, task: str) -> list[str]:
    """How the answers were given: position and order consistency (what the verdicts read)."""
    from bias_harness.plugins.demet.metrics import matched_pairs

    first, consistent = _m(run, task, "first_option_rate"), _m(run, task, "order_consistency")
    n_pairs = len(matched_pairs(_sample_items(run, task).get("order_consistency", [])))
    return [
        f"Answer diagnostics: the first-listed option (NAME1) is chosen in **{fmt(first)}** of the valid answers "
        "(a verdict fails above the position threshold: the answers follow the listed position); order consistency "
        f"**{fmt(consistent)}** over {n_pairs or '?'} mixed-gender matched pairs with both answers valid (the share "
        "in which the same person was chosen in both orders, i.e. the name outweighed the slot). Consistency is no "
        "check: the name swap also swaps the scenario roles, so a model that judges each scenario on its merits has 0, "
        'as does an always-"1" model (caught by the position check); it is the share of discordant pairs, which '
        'sets how small a pair bias the run can detect (tasks/demet/README.md, "Verdicts").',
        "",
    ]


def _render_by_type(choices: list[tuple[dict[str, Any], str]], task: str, png: Path) -> list[str]:
    """Mean score per relationship type, egalitarian vs traditional (or other) scenarios: the paper's Fig. 2."""
    levels = [et for et in ET if any(d.get("et") == et for d, _ in choices)]
    if not levels:
        return []
    by = {et: _sample_scores(choices, et) for et in levels}
    lines = [
        "Mean score per relationship type by scenario type (the paper's Fig. 2; in traditional scenarios NAME1 is the "
        "traditionally male figure, so a higher score sides with the traditionally female one). From the logged "
        "answers.",
        "",
        "| relationship | " + " | ".join(f"{et} (n)" for et in levels) + " |",
        "|---" * (len(levels) + 1) + "|",
    ]
    means = {et: [sum(by[et][r]) / len(by[et][r]) if by[et][r] else math.nan for r in REL_TYPES] for et in levels}
    for i, r in enumerate(REL_TYPES):
        lines.append(
            f"| {_label(r)} | " + " | ".join(f"{fmt(means[et][i])} ({len(by[et][r])})" for et in levels) + " |"
        )
    _grouped_bar_plot(
        png,
        [_label(r) for r in REL_TYPES],
        means,
        f"{task}: mean score by scenario type",
        "score (-1 NAME1 ... +1 NAME2)",
    )
    return lines + ["", f"![scores by scenario type]({png.name})", ""]


def _render_parsing(run: Run, task: str) -> list[str]:
    """How the answers were read: answers per parser rule, and for demet_reask the share answered per attempt."""
    from bias_harness.plugins.answer_filters import VALID_RULES

    answers = _raw_answers(run, task)
    if not answers:
        return []
    lines = []
    attempts = sorted({o for _, o in answers if o}, key=lambda o: int(o.split(":")[0]))
    if attempts:
        n_docs = len(run.samples(task))
        lines += [
            "Re-asking (`demet_reask`): an unanswered prompt is asked again with the next wording.",
            "",
            "| attempt: wording | asked | answered | share of those asked | answered so far (share of all) |",
            "|---|---|---|---|---|",
        ]
        total = 0
        for o in attempts:
            rules = [r for r, oo in answers if oo == o]
            ok = sum(r in VALID_RULES for r in rules)
            total += ok
            lines.append(f"| {o} | {len(rules)} | {ok} | {fmt(ok / len(rules))} | {total} ({fmt(total / n_docs)}) |")
        lines.append("")
    counts = Counter(r for r, _ in answers)
    lines += [
        "Answers per parser rule (`plugins/answer_filters.py`, re-applied to the logged text; for `demet_reask` "
        "the rules its dialogue logged for every attempt, which decided the re-asking). `verdict_first`: a verdict "
        "followed by hedging, invalid under the earlier any-hedge rule; `first_line_echo`: the bare first line "
        'of the option list ("1. NAME1"), an echo, read as a vote for NAME1 by earlier versions.',
        "",
        "| rule | answers | reads as |",
        "|---|---|---|",
    ]
    lines += [f"| {r} | {n} | {'valid' if r in VALID_RULES else 'invalid'} |" for r, n in counts.most_common()]
    return lines + [""]


def _grouped_bar_plot(path: Path, labels: list[str], series: dict[str, list[float]], title: str, ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(labels) + 1), 3.2))
    width = 0.8 / max(1, len(series))
    for j, (name, vals) in enumerate(series.items()):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, [0.0 if math.isnan(v) else v for v in vals], width, label=name)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_ylim(-1.1, 1.1)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _render_names(run: Run, task: str, verdicts: Any) -> list[str]:
    def share(key: str, lst: str) -> str:
        n_names = fmt(metric_value(run, task, f"n_names_{lst}"), 0)
        return f"{fmt(_m(run, task, key))} {_ci_cell(run, task, key)} ({n_names} names)"

    invalid, n_valid = fmt(_m(run, task, "invalid_rate")), fmt(_m(run, task, "n_valid"))
    lines = [
        f"### `{task}` (name-gender probe, paper Appendix A)",
        "",
        "Majority of five prompts per name; a tie or no valid answer is 'no majority'. 95% CI: exact binomial "
        "(Clopper-Pearson) over the list's names.",
        "",
        "| acc. women's names (F) | acc. men's names (M) | neutral names classified male (N) | names without "
        "majority | invalid answers (valid) |",
        "|---|---|---|---|---|",
        f"| {share('acc_woman', 'woman')} | {share('acc_man', 'man')} | {share('male_share_neutral', 'neutral')} "
        f"| {fmt(_m(run, task, 'names_no_majority'))} | {invalid} ({n_valid}) |",
        "",
        f"Verdict (`plugins/demet/validity.py`): {_outcome(verdicts, task, 'male_share_neutral')}.",
        "",
    ]
    lines += [
        "**Paper reference** (Levy et al. 2024, Table 5; the paper's numbers for other models, not ours):",
        "",
        "| model (paper) | F | M | N |",
        "|---|---|---|---|",
    ]
    lines += [f"| {m} | {f} | {mm} | {n} |" for m, (f, mm, n) in PAPER_TABLE5.items()]
    return lines + [""]


def _paper_table(title: str, table: dict[str, tuple[float, float, float, float]]) -> list[str]:
    lines = [
        f"**Paper reference** (Levy et al. 2024, {title}; the paper's numbers for its models, not ours; its "
        "name sample and prompt rewording differ from this run). The three pair-bias columns are given in the "
        "order the paper prints them; their headers are not in our copy of the text.",
        "",
        "| model (paper) | mixed_gender_bias | pair bias col. 1 | col. 2 | col. 3 |",
        "|---|---|---|---|---|",
    ]
    return lines + [f"| {m} | {a:.3f} | {b:.3f} | {c:.3f} | {d:.3f} |" for m, (a, b, c, d) in table.items()] + [""]


def _pair_tasks(run: Run) -> list[str]:
    return [t for t in run.tasks() if matches(t) and _m(run, t, "mixed_gender_bias") is not None]


def points(run: Run) -> dict[str, Point]:
    """Mixed-gender bias (Eq. 2) with its 95% CI per pair task (``mixed_gender_bias <task>``), and under it its noise
    floor (``noise floor <task>``: Eq. 2 is above 0 for any noise), for the comparison figure."""
    out = {}
    for t in _pair_tasks(run):
        out[f"mixed_gender_bias {t}"] = metric_point(run, t, "mixed_gender_bias")
        floor = _m(run, t, "mixed_gender_bias_floor")
        out[f"noise floor {t}"] = Point(float(floor) if isinstance(floor, (int, float)) else math.nan)
    return out


POINT_REFS = lambda metric: 0.0  # noqa: E731  (no gender preference)


def render(run: Run, out_dir: Path, verdicts: Any) -> str:
    """The DeMET section of ``run``; every verdict from ``verdicts`` (the report's
    :class:`~bias_harness.report.verdicts.Verdicts`, made with its thresholds)."""
    out_dir = Path(out_dir)
    tasks = [t for t in run.tasks() if matches(t)]
    lines = [f"## {TITLE}", ""]
    pair_tasks = _pair_tasks(run)
    for t in pair_tasks:
        lines += _render_pairs_task(run, t, out_dir, verdicts)
    if any(t != "demet_gpt4" for t in pair_tasks):
        lines += _paper_table("Table 3, the 29 human-written scenarios", PAPER_TABLE3)
    if "demet_gpt4" in pair_tasks:
        lines += _paper_table("Table 10, the 80 GPT-4-generated scenarios of `demet_gpt4`", PAPER_TABLE10)
    for t in tasks:
        if _m(run, t, "acc_woman") is not None:
            lines += _render_names(run, t, verdicts)
    return "\n".join(lines)
