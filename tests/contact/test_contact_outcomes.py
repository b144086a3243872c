"""The three outcomes of Contact's verdicts on scripted `contact_mini_gen` models through lm-eval, the report (its
section, the Interpretability table, a summary field) and `compare`.

The first 702 prompts of `contact_mini`: 234 complete prompt sets (one template cell per axis x scale x action x 3
cells), 234 answers per contact type."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from bias_harness.plugins import validity as v
from bias_harness.plugins.contact import metrics as cm

import bias_harness
from bias_harness.report.verdicts import Verdicts
from bias_harness.runs import load_run, save_run
from tests.helpers import scripted_lm

lm_eval = pytest.importorskip("lm_eval")
TASK, LIMIT, N = "contact_mini_gen", 702, 234
EFFECTS = ("effect_positive", "effect_negative", "effect_positive_paired", "effect_negative_paired")
K = v.z(0.975) + v.z(0.8)


@cache
def _docs() -> dict[str, dict]:
    return {cm.doc_to_text_gen(d): d for d in cm.load_docs("contact", "mini")["test"][:LIMIT]}


def _answering(biased):
    """A model that gives the biased option where ``biased(doc)``, else the unbiased one."""

    def answer(ctx: str) -> str:
        doc = _docs()[ctx]
        return doc["options"][doc["biased_option"] if biased(doc) else 1 - doc["biased_option"]]

    return answer


def _models() -> dict:
    sets = sorted({d["prompt_set_id"] for d in _docs().values()})
    return {
        "fair": _answering(lambda doc: False),  # never biased: no contact effect at all
        "negative": _answering(lambda doc: doc["contact_type"] == "negative"),  # biased after negative contact only
        "habit": lambda ctx: _docs()[ctx]["options"][0],  # always the affirmative option (Yes / Likely / Mostly)
        # biased after positive contact in 10 prompt sets and without contact in one other: McNemar b = 1, c = 10
        "weak": _answering(
            lambda doc: (
                (doc["contact_type"] == "positive" and doc["prompt_set_id"] in sets[:10])
                or (doc["contact_type"] == "none" and doc["prompt_set_id"] == sets[10])
            )
        ),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("contact_outcomes")
    out = {}
    for name, answer in _models().items():
        res = lm_eval.simple_evaluate(
            model=scripted_lm(answer=answer),
            tasks=[TASK],
            limit=LIMIT,
            log_samples=True,
            task_manager=bias_harness.task_manager(include_defaults=False),
        )
        save_run(res, root / name)
        out[name] = root / name
    return out


def test_fair_model_has_no_detectable_effect_with_its_mde(runs):
    verdicts = Verdicts(load_run(runs["fair"]))
    res = verdicts.results(TASK)
    assert (res["bias_pct_none"], res["n_paired_positive"], res["discordance_positive"]) == (0.0, 234.0, 0.0)
    for metric in EFFECTS:
        verdict = verdicts.verdict(TASK, metric)
        assert verdict.outcome == v.NO_DETECTABLE_BIAS, (metric, verdict.text())
    # paired: 100 x the exact McNemar MDE at 234 sets without a discordant one (about 8 new discordant sets of 234)
    paired = verdicts.verdict(TASK, "effect_positive_paired")
    assert paired.mde == pytest.approx(100 * v.mcnemar_mde(N, 0.0, 0.05, 0.8)) and 3.0 < paired.mde < 4.0
    assert paired.test.p == 1.0
    # unpaired: the bootstrap CI is [0, 0]; the floor is the null SE of two shares of 234 answers at the pooled share
    # raised to k^2 h / 4 (h = 2 / 234): SE = 100 k h / 2, MDE = k SE = 50 k^2 h = 3.354 points
    unpaired = verdicts.verdict(TASK, "effect_negative")
    assert (res["effect_negative_ci_lo"], res["effect_negative_ci_hi"]) == (0.0, 0.0)
    assert unpaired.mde == pytest.approx(50 * K**2 * 2 / N) and unpaired.mde == pytest.approx(3.354, abs=1e-3)
    assert "at least that of a difference of two independent shares" in unpaired.why()
    # the bias % has no null value: a measurement
    assert verdicts.verdict(TASK, "bias_pct_none").outcome == v.INTERPRETABLE


def test_negative_contact_model_is_a_bias_as_the_hypothesis_predicts(runs):
    verdicts = Verdicts(load_run(runs["negative"]))
    res = verdicts.results(TASK)
    assert res["effect_negative_paired"] == 100.0 and res["discordance_negative"] == 1.0
    assert res["mcnemar_p_negative"] == pytest.approx(2 * 0.5**N)
    for metric in ("effect_negative", "effect_negative_paired"):
        verdict = verdicts.verdict(TASK, metric)
        assert verdict.outcome == v.BIAS
        assert verdict.direction == "higher bias after negative contact (as the Contact Hypothesis predicts)"
    assert verdicts.verdict(TASK, "effect_positive_paired").outcome == v.NO_DETECTABLE_BIAS
    assert verdicts.direction(TASK, "effect_negative_paired").startswith("higher bias after negative contact")


def test_answer_habit_is_not_interpretable(runs):
    verdicts = Verdicts(load_run(runs["habit"]))
    res = verdicts.results(TASK)
    assert res["same_answer_rate"] == 1.0 and res["bias_pct_none"] == 50.0
    for metric in ("bias_pct_none", *EFFECTS):
        verdict = verdicts.verdict(TASK, metric)
        assert verdict.outcome == v.NOT_INTERPRETABLE
        assert verdict.reasons == (
            "100% of the action pairs (inclusive and avoidance question) answered with the same option (more than "
            "50%): the answers ignore the action asked about, so the bias % measures an answer habit",
        )


def test_weak_effect_and_an_alpha_override_agree_in_every_table_and_summary(runs, tmp_path):
    """10 prompt sets biased only after positive contact, one only without: exact McNemar p = 2 x 12 / 2^11 = 0.0117,
    a bias at alpha 0.05 and no detectable bias at 0.01, in the section's tables, the Interpretability table and the
    summary alike; the paired effect is 100 x 9 / 234 = 3.85 points."""
    from bias_harness.report.page import write_report

    summary = tmp_path / "summary.md"
    summary.write_text(f"## contact\n\nPaired: {{{{ Scripted | {TASK} | effect_positive_paired | dir }}}}.\n")
    for alpha, words in ((0.05, "higher bias after positive contact (against"), (0.01, "no detectable bias (MDE ")):
        verdict = Verdicts(load_run(runs["weak"]), overrides={"alpha": alpha}).verdict(TASK, "effect_positive_paired")
        assert verdict.test.p == pytest.approx(2 * 12 / 2**11) and verdict.test.value == pytest.approx(900 / N)
        page = write_report([runs["weak"]], tmp_path / f"r{alpha}", summary=summary, thresholds={"alpha": alpha})
        lines = page.read_text().splitlines()
        rows = [
            next(line for line in lines if line.startswith("| positive | 234 |")),  # the answer-validity table
            next(line for line in lines if line.startswith(f"| {TASK} | effect_positive_paired |")),
            next(line for line in lines if line.startswith("**Summary.**")),
            next(line for line in lines if line.startswith("Contact Hypothesis (RQ2")),
        ]
        for text in rows:
            assert words in text, (alpha, text)
        other = "no detectable bias (MDE" if alpha == 0.05 else "higher bias after positive"
        assert not any(other in text for text in rows[:3])


def test_compare_reads_the_fair_run_as_a_reduction_below_detection(runs):
    from bias_harness.report.compare import compare_runs

    cmp = compare_runs(runs["negative"], runs["fair"], iters=200)
    m = cmp.find(TASK, "effect_negative_paired")
    assert (m.value_a, m.value_b) == (100.0, 0.0) and m.significant
    assert m.reads_as.startswith("reduction of bias to below detection (MDE "), m.reads_as
    cmp = compare_runs(runs["negative"], runs["habit"], iters=200)
    assert cmp.find(TASK, "effect_negative_paired").reads_as == "not a change in bias (a verdict failed)"
