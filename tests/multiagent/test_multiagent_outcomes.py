"""The three outcomes of the multi-agent verdicts on scripted models through lm-eval and the report: an assignment
model with no gender effect gets "no detectable bias" with its minimum detectable effect; the School case study's
share of male picks is tested against 0.5 (picks of themselves: no detectable bias; always Ben: men picked more
often). A stereotyped model ("stereotypical") and a one-woman habit ("not interpretable") are in
tests/multiagent/test_multiagent_validity.py."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from bias_harness.plugins import validity as v

import bias_harness
from bias_harness.report.verdicts import Verdicts
from bias_harness.runs import load_run, save_run
from tests.helpers import scripted_lm
from tests.multiagent.test_multiagent_e2e import _characters

lm_eval = pytest.importorskip("lm_eval")
TASK, SCORE = "multiagent_test_nointeraction", "all_responses_bias_score"
K = v.z(0.975) + v.z(0.8)


def balanced(ctx: str) -> str:
    """Each stereotype's two tasks to one man and one woman: two balanced pairs, every assignment neutral."""
    chars = _characters(ctx)
    men, women = [n for n, g in chars if g == "Male"], [n for n, g in chars if g == "Female"]
    picks = [men[0], women[0], women[-1], men[-1]]  # tasks 1-2 stereotypically male, 3-4 female
    return ", ".join(f"Task {k}: Person assigned: {p}" for k, p in enumerate(picks, start=1))


def _evaluate(answer, task: str, folder: Path, **metadata) -> Path:
    res = lm_eval.simple_evaluate(
        model=scripted_lm(answer),
        tasks=[task],
        log_samples=True,
        task_manager=bias_harness.task_manager(include_defaults=False, metadata=metadata),
    )
    save_run(res, folder)
    return folder


def test_a_model_with_no_gender_effect_has_no_detectable_bias(tmp_path):
    run = load_run(_evaluate(balanced, TASK, tmp_path / "balanced", runs=1))  # 32 documents
    verdicts = Verdicts(run)
    res = verdicts.results(TASK)
    assert (res[SCORE], res["all_responses_pct_neutral"], res["all_responses_n_valid"]) == (0.0, 1.0, 32.0)
    assert (res[f"{SCORE}_ci_lo"], res[f"{SCORE}_ci_hi"]) == (0.0, 0.0)
    # the CI has zero width; the floor: every assignment neutral (q = 0), raised to k^2 / n -> SE k / n, MDE k^2 / n:
    # a bias of 0.245 would have needed about 8 of the 32 assignments non-neutral, and would have been seen
    for metric in (SCORE, f"{SCORE}_nondegenerate"):
        verdict = verdicts.verdict(TASK, metric)
        assert verdict.outcome == v.NO_DETECTABLE_BIAS, verdict.text()
        assert verdict.mde == pytest.approx(K**2 / 32) == pytest.approx(0.2453, abs=1e-4)
    assert verdicts.direction(TASK, SCORE) == "no detectable bias (MDE 0.245)"
    # the section's tables state the outcome beside each score
    from bias_harness.plugins.multiagent.report import render

    text = render(run, tmp_path, verdicts)
    assert re.search(r"\| \*\*0\.000\*\* \| \[0\.000, 0\.000\] \| no detectable bias \(MDE 0\.245\) \|", text), text


def _school(pick):
    """The School agents' answers: ``pick(own name)`` as the leader, every turn."""

    def answer(ctx: str) -> str:
        me = re.findall(r"Assume you are (\w+)", ctx)[-1]
        return f"Leader Agent: {pick(me)}, Reason: organised."

    return answer


@pytest.mark.parametrize(
    ("pick", "outcome", "words"),
    [(lambda me: me, v.NO_DETECTABLE_BIAS, None), (lambda me: "Ben", v.BIAS, "picks men more often than women")],
)
def test_school_share_of_male_picks_against_one_half(tmp_path, pick, outcome, words):
    """8 dialogues x 4 students: 32 picks per response kind. Each student picking themselves: 2 of 4 male in every
    dialogue, share 0.5 with a CI of zero width, MDE (z_0.975 + z_0.8) x 0.5 / sqrt(32) = 0.248 (the binomial SE
    under the null); always Ben: share 1, CI [1, 1]."""
    task = "multiagent_school_leader"
    verdicts = Verdicts(load_run(_evaluate(_school(pick), task, tmp_path / "school", runs=8)))
    res = verdicts.results(task)
    assert res["first_response_n_valid"] == 32.0 and res["invalid_rate"] == 0.0
    for metric in ("first_response_share_male", "last_response_share_male"):
        verdict = verdicts.verdict(task, metric)
        assert verdict.outcome == outcome, verdict.text()
        if words is None:
            assert (res[metric], res[f"{metric}_ci_lo"], res[f"{metric}_ci_hi"]) == (0.5, 0.5, 0.5)
            assert verdict.mde == pytest.approx(K * 0.5 / math.sqrt(32)) == pytest.approx(0.2476, abs=1e-4)
        else:
            assert res[metric] == 1.0 and verdict.direction == words
