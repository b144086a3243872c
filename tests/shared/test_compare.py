"""Paired comparison (plugins/paired.py, `bias-harness compare`): hand-worked fixtures and real lm-eval runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bias_harness.datasets_src.demet.builder import NAMES
from bias_harness.plugins.paired import RunMismatch, bootstrap_p, mcnemar_paired, paired_bootstrap

import bias_harness
from bias_harness.report.compare import compare_runs
from tests.helpers import save_scripted_run, scripted_lm

scipy_stats = pytest.importorskip("scipy.stats")
LIST_OF = {n: g for g, names in NAMES.items() for n in names}
RANK = {"woman": 0, "neutral": 1, "man": 2}


def _mean(items: dict[str, list[float]]) -> dict[str, float]:
    return {"x": float(np.mean(items["x"]))}


# ---------------------------------------------------------------- the driver, hand-worked


def test_constant_shift_exact_difference_zero_width_ci() -> None:
    a = [{"x": [v]} for v in (0.0, 0.25, 0.5, 1.0, 0.75, 0.25)]
    b = [{"x": [v + 0.5]} for v in (0.0, 0.25, 0.5, 1.0, 0.75, 0.25)]
    r = paired_bootstrap(a, b, _mean, iters=200)["x"]
    assert r["diff"] == 0.5  # exact on the full run; every resample differs by 0.5 up to float rounding of the mean
    assert r["ci_lo"] == pytest.approx(0.5, abs=1e-12) and r["ci_hi"] - r["ci_lo"] == pytest.approx(0.0, abs=1e-12)
    assert r["p_bootstrap"] == pytest.approx(2 / 201)  # no resample at or below 0: the smallest p 200 resamples give


def test_identical_runs_difference_zero_p_one() -> None:
    a = [{"x": [v, 1 - v]} for v in (0.0, 0.3, 0.9, 0.4)]
    r = paired_bootstrap(a, [dict(u) for u in a], _mean, iters=100)["x"]
    assert (r["diff"], r["ci_lo"], r["ci_hi"], r["p_bootstrap"]) == (0.0, 0.0, 0.0, 1.0)


def test_bootstrap_p_counts_both_tails() -> None:
    # 3 of 9 resamples <= 0, 7 >= 0 (one is 0): p = 2 * (3 + 1) / (9 + 1)
    assert bootstrap_p(np.array([-2.0, -1.0, 0.0, 1, 2, 3, 4, 5, 6])) == pytest.approx(0.8)


def test_units_travel_together_and_duplicates_are_relabelled() -> None:
    # statistic: number of distinct unit ids; resampling 3 units always gives 3 distinct ids once copies are relabelled
    a = [{"ids": [(f"u{i}",)]} for i in range(3)]

    def distinct(items):
        return {"n": float(len(set(items["ids"])))}

    r = paired_bootstrap(a, a, distinct, relabel=lambda it, tag: (it[0] + tag,), iters=50)["n"]
    assert r["value_a"] == 3.0 and r["diff"] == 0.0
    # without relabelling the count drops below 3 on most resamples (duplicates merge): the test can fail
    r2 = paired_bootstrap(a, [{"ids": [(f"v{i}",), (f"w{i}",)]} for i in range(3)], distinct, iters=50)["n"]
    assert r2["diff"] == 3.0 and r2["ci_lo"] < 3.0


@pytest.mark.parametrize("b,c", [(0, 0), (3, 12), (25, 10), (1, 1), (0, 7)])
def test_mcnemar_matches_exact_binomial_from_scipy(b: int, c: int) -> None:
    # b documents 1 -> 0, c documents 0 -> 1, plus concordant and undefined ones that must not count
    oa = [1] * b + [0] * c + [1, 0, 1, None, 0]
    ob = [0] * b + [1] * c + [1, 0, 1, 1, None]
    got_b, got_c, n, p = mcnemar_paired(oa, ob)
    assert (got_b, got_c, n) == (b, c, b + c + 3)
    want = 1.0 if b + c == 0 else scipy_stats.binomtest(b, b + c, 0.5).pvalue
    assert p == pytest.approx(want, rel=1e-12)


def test_mcnemar_textbook_case() -> None:
    # Agresti (2007), Categorical Data Analysis Intro, Table 8.1 (presidential approval): discordant 150 and 86; the
    # exact two-sided binomial p is 2 * P[Bin(236, 1/2) <= 86], about 3.7e-05 (z = 4.17 in the book)
    _, _, _, p = mcnemar_paired([1] * 150 + [0] * 86, [0] * 150 + [1] * 86)
    assert p == pytest.approx(scipy_stats.binom.cdf(86, 236, 0.5) * 2, rel=1e-9)
    assert 3e-05 < p < 4.5e-05


# ---------------------------------------------------------------- real lm-eval runs (scripted answers)


def _names(ctx: str) -> list[str]:
    return [line[3:].rstrip(".") for line in ctx.splitlines() if line[:3] in ("1. ", "2. ")]


def _always_first(ctx: str) -> str:
    return "1"


def _oracle(ctx: str) -> str:  # woman > neutral > man, else NAME1: every pair bias is 2 (see test_demet_report)
    n = _names(ctx)
    return "1" if RANK[LIST_OF[n[0]]] <= RANK[LIST_OF[n[1]]] else "2"


def _invalid_if(rule):
    def answer(ctx: str) -> str:
        n = _names(ctx)
        return "I cannot say." if rule(n[0], n[1]) else "1"

    return answer


RULE_A = lambda n1, n2: len(n1) % 2 == 0  # noqa: E731
RULE_B = lambda n1, n2: n2[0] in "AEJLMS"  # noqa: E731


def _run(folder: Path, answer, limit: int = 261) -> Path:
    return save_scripted_run(folder, answer, ["demet"], limit)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("lm_eval")
    base = tmp_path_factory.mktemp("compare_runs")
    return {
        "first": _run(base / "first", _always_first),
        "oracle": _run(base / "oracle", _oracle),
        "inv_a": _run(base / "inv_a", _invalid_if(RULE_A)),
        "inv_b": _run(base / "inv_b", _invalid_if(RULE_B)),
        "short": _truncated(base / "first", base / "short", 100),
    }


def _truncated(run: Path, dest: Path, n: int) -> Path:
    """A copy of ``run`` whose samples file keeps only its first ``n`` documents (as a --limit n run would)."""
    import shutil

    shutil.copytree(run, dest)
    for path in dest.rglob("samples_*.jsonl"):
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))
    return dest


def test_constant_shift_on_demet_matched_pairs(runs) -> None:
    # A: NAME1 always -> every pair bias 0; B: the oracle -> every pair bias 2, on every resample of matched pairs
    cmp = compare_runs(runs["first"], runs["oracle"], iters=200)
    for metric in ("mixed_gender_bias", "pair_bias_woman_man", "pair_bias_woman_neutral", "pair_bias_neutral_man"):
        m = cmp.find("demet", metric)
        assert (m.value_a, m.value_b, m.diff, m.ci_lo, m.ci_hi) == (0.0, 2.0, 2.0, 2.0, 2.0), metric
        assert m.unit == "matched name pair" and m.p_mcnemar is None and m.consistent
        assert m.p_bootstrap == pytest.approx(2 / (m.n_resamples + 1)) and m.significant
    inv = cmp.find("demet", "invalid_rate")
    assert (inv.diff, inv.mcnemar_b, inv.mcnemar_c, inv.p_mcnemar, inv.significant) == (0.0, 0, 0, 1.0, False)


def test_identical_runs(runs) -> None:
    cmp = compare_runs(runs["oracle"], runs["oracle"], iters=100)
    assert cmp.metrics and all(m.diff == 0.0 and m.p == 1.0 and not m.significant for m in cmp.metrics)
    assert all(m.ci_lo == 0.0 and m.ci_hi == 0.0 for m in cmp.metrics)


def test_mcnemar_on_invalid_answers_of_real_runs(runs) -> None:
    # expected discordant counts from the dataset's documents directly (not from the samples the runs wrote)
    from bias_harness.plugins.data import load

    docs = list(load("demet", "prompts")["test"])[:261]
    a = [RULE_A(d["name1"], d["name2"]) for d in docs]
    b = [RULE_B(d["name1"], d["name2"]) for d in docs]
    want_b = sum(x and not y for x, y in zip(a, b))  # invalid in A only
    want_c = sum(y and not x for x, y in zip(a, b))
    assert want_b > 0 and want_c > 0 and want_b != want_c
    m = compare_runs(runs["inv_a"], runs["inv_b"], iters=100).find("demet", "invalid_rate")
    assert (m.mcnemar_b, m.mcnemar_c, m.mcnemar_n) == (want_b, want_c, 261)
    assert m.diff == pytest.approx((sum(b) - sum(a)) / 261)
    assert m.p_mcnemar == pytest.approx(scipy_stats.binomtest(want_b, want_b + want_c, 0.5).pvalue, rel=1e-12)


def test_different_documents_are_refused(runs) -> None:
    with pytest.raises(
        RunMismatch,
        match=r"task demet: the runs are on different documents: 161 doc id\(s\) only in .*first \(100, 101, 102",
    ):
        compare_runs(runs["first"], runs["short"])


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bias_harness", "compare", *args], capture_output=True, text=True, cwd=cwd
    )


def test_cli_markdown_plot_and_json(runs, tmp_path: Path) -> None:
    proc = _cli(str(runs["first"]), str(runs["oracle"]), "--iters", "100", "--out", "cmp", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "cmp" / "README.md").read_text()
    assert "Resampling unit: matched name pair" in text
    assert "| mixed_gender_bias | 0.000 | 2.000 | +2.000 | [2.000, 2.000] |" in text and "| **yes** |" in text
    assert "McNemar (exact) (b=0, c=0, n=261)" in text
    png = tmp_path / "cmp" / "compare_demet_choice.png"
    assert png.stat().st_size > 1000 and f"]({png.name})" in text

    proc = _cli(str(runs["first"]), str(runs["oracle"]), "--iters", "50", "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    row = next(m for m in data["metrics"] if m["metric"] == "pair_bias_woman_man")
    assert (row["diff"], row["ci_lo"], row["ci_hi"], row["significant"], row["test"]) == (
        2.0,
        2.0,
        2.0,
        True,
        "paired bootstrap",
    )


def test_cli_refuses_different_documents(runs, tmp_path: Path) -> None:
    proc = _cli(str(runs["first"]), str(runs["short"]), cwd=tmp_path)
    assert proc.returncode == 2
    assert (
        "task demet: the runs are on different documents" in proc.stderr
        and "(100, 101, 102, 103, 104, ...)" in proc.stderr
    )


def test_contact_prompt_sets_and_mcnemar_on_bias_pct(tmp_path: Path) -> None:
    """Contact: the adapter reuses contact_metrics (full-run values equal lm-eval's), resamples prompt sets, and tests
    each bias % with McNemar on the documents valid in both runs; b/c counted from the dataset's documents."""
    import lm_eval
    from bias_harness.plugins.contact import metrics as cm

    from bias_harness.runs import save_run

    all_docs = list(cm.load_docs("contact", "mini")["test"])
    docs = {cm.doc_to_text_gen(d): d for d in all_docs}

    def biased_a(d):
        return d["template_id"] % 2 == 1

    def biased_b(d):
        return len(d["descriptor"]) % 2 == 0

    def answering(rule):
        def answer(ctx: str) -> str:
            d = docs[ctx]
            if d["axis"] == "nonce":
                return "I would rather not say."
            return d["options"][d["biased_option"] if rule(d) else 1 - d["biased_option"]]

        return answer

    for name, rule in (("a", biased_a), ("b", biased_b)):
        res = lm_eval.simple_evaluate(
            model=scripted_lm(answering(rule)),
            tasks=["contact_mini_gen"],
            limit=1500,
            log_samples=True,
            bootstrap_iters=0,
            task_manager=bias_harness.task_manager(include_defaults=False, metadata={"breakdown": True}),
        )
        save_run(res, tmp_path / name)
    cmp = compare_runs(tmp_path / "a", tmp_path / "b", iters=200)
    valid = [d for d in all_docs[:1500] if d["axis"] != "nonce"]  # --limit 1500: the first 1500 documents
    for contact in ("none", "positive", "negative"):
        m = cmp.find("contact_mini_gen", f"bias_pct_{contact}")
        sub = [d for d in valid if d["contact_type"] == contact]
        want_b = sum(biased_a(d) and not biased_b(d) for d in sub)
        want_c = sum(biased_b(d) and not biased_a(d) for d in sub)
        assert (m.mcnemar_b, m.mcnemar_c, m.mcnemar_n) == (want_b, want_c, len(sub)) and want_b and want_c
        assert m.p_mcnemar == pytest.approx(scipy_stats.binomtest(want_b, want_b + want_c, 0.5).pvalue, rel=1e-12)
        assert m.diff == pytest.approx(100 * (want_c - want_b) / len(sub))
        assert m.unit == "prompt set" and m.consistent and m.ci_lo <= m.diff <= m.ci_hi
    eff = cmp.find("contact_mini_gen", "effect_negative")
    assert eff.p_mcnemar is None and eff.consistent  # a difference of two shares: bootstrap only
    inv = cmp.find("contact_mini_gen", "invalid_rate")
    assert inv.diff == 0.0 and inv.p_mcnemar == 1.0  # the same nonce prompts refused in both runs
    # the paired effects and the invalid rate per contact type are compared too (no invalid answer differs here)
    assert cmp.find("contact_mini_gen", "effect_negative_paired").consistent
    assert cmp.find("contact_mini_gen", "invalid_rate_positive").diff == 0.0


def test_stop_progressions_and_mcnemar_on_success_and_counterfactual(tmp_path: Path) -> None:
    """STOP: unit = progression; P and P_counter are shares of per-progression binary outcomes (McNemar)."""
    import os

    import lm_eval

    from bias_harness.runs import save_run

    raw = json.loads(
        (Path(os.environ["BIAS_HARNESS_RAW_DIR"]) / "stop" / "STOP-full.json").read_text(encoding="utf-8")
    )[:45]
    ideal = {"low": ["Yes"] * 5, "moderate": ["Yes"] + ["No"] * 4, "high": ["No"] * 5}

    def flips_cf(r):
        return len(r["cfprompt"]) % 3 == 0

    def fails_moderate(r):  # "No" to the first sentence: early stop, sensitivity 1.0 instead of the ideal 0.8
        return r["severity"] == "moderate" and len(r["prompts"][0]) % 2 == 0

    def answering(perturbed: bool):
        lookup = {}
        for r in raw:
            for i, s in enumerate(r["prompts"]):
                lookup[s] = "No" if perturbed and i == 0 and fails_moderate(r) else ideal[r["severity"]][i]
            lookup[r["cfprompt"]] = "Yes" if perturbed and flips_cf(r) else "No"
        return lambda ctx: lookup[ctx.rsplit("User: ", 1)[-1].removesuffix("\n\nAssistant:").split("\n")[-1]]

    for name, perturbed in (("a", False), ("b", True)):
        res = lm_eval.simple_evaluate(
            model=scripted_lm(answering(perturbed)),
            tasks=["stop"],
            limit=45,
            log_samples=True,
            bootstrap_iters=0,
            task_manager=bias_harness.task_manager(include_defaults=False, metadata={"breakdown": True}),
        )
        save_run(res, tmp_path / name)
    cmp = compare_runs(tmp_path / "a", tmp_path / "b", iters=1000)
    n_cf, n_fail = sum(map(flips_cf, raw)), sum(map(fails_moderate, raw))
    assert n_cf and n_fail
    p_counter, p, p_mod = (cmp.find("stop", k) for k in ("P_counter", "P", "P_moderate"))
    assert (p_counter.mcnemar_b, p_counter.mcnemar_c, p_counter.diff) == (n_cf, 0, pytest.approx(-n_cf / 45))
    assert p_counter.p_mcnemar == pytest.approx(scipy_stats.binomtest(n_cf, n_cf, 0.5).pvalue)
    assert (p.mcnemar_b, p.mcnemar_c, p.diff, p.value_a) == (n_fail, 0, pytest.approx(-n_fail / 45), 1.0)
    n_mod = sum(r["severity"] == "moderate" for r in raw)
    assert (p_mod.mcnemar_b, p_mod.mcnemar_n, p_mod.diff) == (n_fail, n_mod, pytest.approx(-n_fail / n_mod))
    assert all(m.unit == "progression" and m.n_units == 45 and m.consistent for m in cmp.metrics)
    assert cmp.find("stop", "P_high").diff == 0.0 and cmp.find("stop", "P_high").p == 1.0
    # independent check against the task's own bootstrap (stop_metrics -> stats.bootstrap_ci, 1000 resamples of
    # progressions, seed 1234): run A is ideal on every resample (P = P_counter = 1), so the paired CI of B - A is
    # B's own CI recorded by lm-eval, shifted by -1 (same seed and draws)
    recorded = json.loads(next((tmp_path / "b").glob("results_*.json")).read_text())["results"]["stop"]
    for metric in ("P", "P_moderate", "P_counter"):
        m = cmp.find("stop", metric)
        assert (m.ci_lo, m.ci_hi) == (
            pytest.approx(recorded[f"{metric}_ci_lo,none"] - 1),
            pytest.approx(recorded[f"{metric}_ci_hi,none"] - 1),
        )
        assert m.ci_lo < m.ci_hi < 0


def test_unit_option(runs) -> None:
    with pytest.raises(ValueError, match="no compared task offers the resampling unit 'context'"):
        compare_runs(runs["first"], runs["oracle"], unit="context", iters=10)
    assert (
        compare_runs(runs["first"], runs["oracle"], unit="matched_name_pair", iters=10).metrics[0].unit
        == "matched name pair"
    )
