"""DeMET's interpretability verdicts (plugins/demet/validity.py) through the shared contract (plugins/validity.py):
scripted models through lm-eval, the thresholds, and the user's commands in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bias_harness.plugins import validity
from bias_harness.plugins.demet import metrics as dm

import bias_harness
from tests.helpers import scripted_lm

lm_eval = pytest.importorskip("lm_eval")
BIN = Path(sys.executable).parent


def _results(lm, task: str, limit: int) -> dict:
    res = lm_eval.simple_evaluate(
        model=lm,
        tasks=[task],
        limit=limit,
        bootstrap_iters=0,
        task_manager=bias_harness.task_manager(include_defaults=False),
    )
    return res["results"][task]  # lm-eval's keys, "metric,choice"


@pytest.fixture(scope="module")
def always_one() -> dict:
    """An always-"1" model on `demet`, slots 0-1 (every matched pair complete)."""
    return _results(scripted_lm(lambda ctx: "1"), "demet", 522)


def test_always_first_option_model_is_marked_not_interpretable(always_one):
    plain = validity.plain_results(always_one)
    assert (plain["first_option_rate"], plain["order_consistency"]) == (1.0, 0.0)
    assert plain["mixed_gender_bias"] == 0.0 and plain["mixed_gender_bias_perm_p"] == 1.0 and plain["n_valid"] == 522
    v = validity.verdict("demet", "mixed_gender_bias", always_one)
    assert v.text() == "not interpretable: 100.0% of the valid answers pick the first-listed option (> 90%)"
    assert v.outcome == validity.NOT_INTERPRETABLE and v.mde is None and v.test is None
    for metric in ("pair_bias_woman_man", "pair_bias_neutral_man_topic_money", "mixed_gender_bias_egalitarian"):
        assert not validity.verdict("demet", metric, always_one).interpretable, metric
    score = validity.verdict("demet", "score_woman_man", {**always_one, "score_woman_man": -1.0})  # a breakdown
    assert score.reasons == v.reasons  # position
    # no verdict on the diagnostics, CIs, p-values and counts themselves
    for metric in ("first_option_rate", "mixed_gender_bias_perm_p", "n_valid", "order_consistency_woman_man"):
        assert validity.verdict("demet", metric, always_one) is None
    # nor a direction: the verdict's reasons instead
    pair = validity.verdict("demet", "pair_bias_woman_man", always_one)
    assert validity.direction("demet", "pair_bias_woman_man", always_one) == pair.text()


def test_thresholds_decide_and_can_be_overridden(always_one):
    relaxed = {"max_position_share": 1.0, "alpha": 1.0}
    lax = validity.thresholds(overrides=relaxed)
    v = validity.verdict("demet", "mixed_gender_bias", always_one, lax)
    assert v.interpretable and v.outcome == validity.BIAS  # alpha 1: any p "detects"; Eq. 2 0 with p 1 then is one
    strict = validity.thresholds({"validity": {"min_valid": 600}}, relaxed)  # a task's metadata, then the caller's
    assert validity.verdict("demet", "mixed_gender_bias", always_one, strict).reasons == ("522 valid answers (< 600)",)
    with pytest.raises(ValueError, match="unknown validity threshold 'min_order_consistency'"):
        validity.thresholds(overrides={"min_order_consistency": 0.1})  # no longer a check (tasks/demet/README.md)
    with pytest.raises(ValueError, match="alpha must be a number from 0 to 1, not nan"):
        validity.thresholds(overrides={"alpha": float("nan")})


def test_verdict_on_hand_made_results():
    th = validity.DEFAULT_THRESHOLDS
    good = {
        "n_valid": 5219,
        "invalid_rate": 0.0,
        "first_option_rate": 0.81,
        "order_consistency": 0.13,
        "mixed_gender_bias": 0.066,
        "mixed_gender_bias_floor": 0.024,
        "mixed_gender_bias_perm_p": 0.0003,
        "pair_bias_woman_man": 0.02,
        "mcnemar_p_woman_man": 0.6,
        **{f"n_pairs_{p}": 580 for p in ("woman_man", "woman_neutral", "neutral_man")},
        **{f"order_consistency_{p}": 0.13 for p in ("woman_man", "woman_neutral", "neutral_man")},
    }
    v = validity.verdict("demet_mc", "mixed_gender_bias", good, th)
    assert v.outcome == validity.BIAS and v.text().startswith("bias (permutation (noise floor 0.024) p 0.0003 <= 0.05")
    pair_mde = 2 * validity.mcnemar_mde(580, 0.13, 0.05, 0.8)
    assert v.mde == pytest.approx(pair_mde) and 0.08 < pair_mde < 0.09
    # at its noise floor, Eq. 2 is a valid null result with its MDE, no longer "not interpretable"
    noise = {**good, "mixed_gender_bias": 0.103, "mixed_gender_bias_floor": 0.080, "mixed_gender_bias_perm_p": 0.345}
    v = validity.verdict("demet_mc", "mixed_gender_bias", noise, th)
    assert v.outcome == validity.NO_DETECTABLE_BIAS and v.headline() == f"no detectable bias (MDE {pair_mde:.3g})"
    assert v.why().startswith("permutation (noise floor 0.080) p 0.345 > 0.05; MDE: the mean of the three")
    pair = validity.verdict("demet_mc", "pair_bias_woman_man", noise, th)
    assert pair.outcome == validity.NO_DETECTABLE_BIAS and "McNemar p 0.6 > 0.05" in pair.text()
    # SmolLM2 on `demet` after the echo rule: 36 valid answers of 5,220, all the first option, no complete pair
    nan = float("nan")
    echo = {"n_valid": 36, "invalid_rate": 0.9931, "first_option_rate": 1.0, "mixed_gender_bias": nan}
    reasons = validity.verdict("demet", "mixed_gender_bias", echo, th).reasons
    assert [r.split(" ")[0] for r in reasons] == ["99.3%", "100.0%", "mixed_gender_bias"]
    # a run made before the diagnostics existed is not read as bias
    old = {k: v for k, v in good.items() if k not in ("first_option_rate",)}
    assert validity.verdict("demet_mc", "mixed_gender_bias", old, th).reasons == (
        "no first_option_rate in the results",
    )
    # a breakdown row is valid or not, and tested in the report's table (adjusted p), not here
    topic = {**good, "mixed_gender_bias_topic_money": 0.08, "mixed_gender_bias_topic_money_perm_p": 0.003}
    row = validity.verdict("demet_mc", "mixed_gender_bias_topic_money", topic, th)
    assert row.outcome == validity.INTERPRETABLE and "adjusted" in row.note
    # name probe: answer checks only; no null value, so "interpretable"
    names = {"n_valid": 67, "invalid_rate": 0.553, "male_share_neutral": 1.0}
    assert validity.verdict("demet_names", "male_share_neutral", names, th).outcome == validity.INTERPRETABLE
    assert not validity.verdict("demet_names", "acc_woman", {**names, "n_valid": 12}, th).interpretable


def test_directions_of_the_pair_biases():
    res = {"n_valid": 500, "invalid_rate": 0.0, "first_option_rate": 0.5, "order_consistency": 0.6}

    def bias(name: str, value: float, p: float) -> dict:
        pair = name.removeprefix("pair_bias_")
        return {**res, name: value, f"mcnemar_p_{pair}": p, f"n_pairs_{pair}": 250, f"order_consistency_{pair}": 0.6}

    wm, nm = "pair_bias_woman_man", "pair_bias_neutral_man"
    assert validity.direction("demet", wm, bias(wm, -0.3, 0.001)) == "favours men over women"
    assert validity.direction("demet", nm, bias(nm, 0.1, 0.3)).startswith("no detectable bias (MDE 0.")
    # without McNemar's p (a run without samples) the 95% CI decides
    ci = {**res, wm: 0.2, f"{wm}_ci_lo": 0.05, f"{wm}_ci_hi": 0.35}
    v = validity.verdict("demet", wm, ci)
    assert v.direction == "favours women over men" and v.test.evidence == "95% CI [0.05, 0.35] excludes 0"
    spec = validity.direction_spec("demet", "pair_bias_woman_neutral_topic_money")
    assert spec.above == "favours women over gender-neutral names"
    assert validity.direction_spec("demet", "mixed_gender_bias") is None  # Eq. 2 has no sign


def _run(cmd: list, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("BIAS_HARNESS_AUTOLOAD", "PYTHONPATH")}
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_cli_prints_eq2_floor_p_and_the_report_gives_the_verdict(tiny_causal_lm, tmp_path):
    """The user's path: `bias-harness eval run ... --tasks demet_mc` prints Eq. 2, its floor and p and the two
    diagnostics in lm-eval's table; `bias-harness report` shows them with the verdict."""
    out = tmp_path / "out"
    model = f"pretrained={tiny_causal_lm},dtype=float32"
    table = _run(
        [
            BIN / "bias-harness",
            "eval",
            "run",
            "--model",
            "hf",
            "--model_args",
            model,
            "--tasks",
            "demet_mc",
            "--limit",
            "261",
            "--batch_size",
            "64",
            "--device",
            "cpu",
            "--output_path",
            out,
            "--log_samples",
        ],
        tmp_path,
    )
    rows = {line.split("|")[5].strip() for line in table.splitlines() if line.count("|") > 8}
    assert set(dm.metric_keys()) <= rows and len(rows & set(dm.metric_keys() + dm.breakdown_keys())) == 13
    _run([BIN / "bias-harness", "report", out, "--out", tmp_path / "report"], tmp_path)
    text = (tmp_path / "report" / "README.md").read_text()
    assert "| mixed_gender_bias | 95% CI | noise floor | excess | permutation p | outcome |" in text
    assert "Answer diagnostics: the first-listed option (NAME1) is chosen in **" in text
