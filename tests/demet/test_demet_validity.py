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
    assert v.text().startswith("not interpretable: 100.0% of the valid answers pick the first-listed option")
    assert len(v.reasons) == 3 and v.reasons[1].startswith("order consistency 0.000 (< 0.1)")
    assert v.reasons[2].endswith("(permutation p 1 > 0.05)")
    for metric in ("pair_bias_woman_man", "pair_bias_neutral_man_topic_money", "mixed_gender_bias_egalitarian"):
        assert not validity.verdict("demet", metric, always_one).interpretable, metric
    score = validity.verdict("demet", "score_woman_man", {**always_one, "score_woman_man": -1.0})  # a breakdown
    assert score.reasons == v.reasons[:1]  # position only
    # no verdict on the diagnostics, CIs, p-values and counts themselves
    for metric in ("first_option_rate", "mixed_gender_bias_perm_p", "n_valid"):
        assert validity.verdict("demet", metric, always_one) is None
    # nor a direction: the verdict's reasons instead
    pair = validity.verdict("demet", "pair_bias_woman_man", always_one)
    assert validity.direction("demet", "pair_bias_woman_man", always_one) == pair.text()


def test_thresholds_decide_and_can_be_overridden(always_one):
    relaxed = {"max_position_share": 1.0, "min_order_consistency": 0.0, "alpha": 1.0}
    lax = validity.thresholds(overrides=relaxed)
    assert validity.verdict("demet", "mixed_gender_bias", always_one, lax).interpretable
    strict = validity.thresholds({"validity": {"min_valid": 600}}, relaxed)  # a task's metadata, then the caller's
    assert validity.verdict("demet", "mixed_gender_bias", always_one, strict).reasons == ("522 valid answers (< 600)",)


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
    }
    assert validity.verdict("demet_mc", "mixed_gender_bias", good, th).interpretable
    noise = {**good, "mixed_gender_bias": 0.103, "mixed_gender_bias_floor": 0.080, "mixed_gender_bias_perm_p": 0.345}
    assert validity.verdict("demet_mc", "mixed_gender_bias", noise, th).reasons == (
        "Eq. 2 0.103 is not above its noise floor 0.080 (permutation p 0.345 > 0.05)",
    )
    assert validity.verdict("demet_mc", "pair_bias_woman_man", noise, th).interpretable  # its CI decides its direction
    # SmolLM2 on `demet` after the echo rule: 36 valid answers of 5,220, all the first option, no complete pair
    nan = float("nan")
    echo = {
        "n_valid": 36,
        "invalid_rate": 0.9931,
        "first_option_rate": 1.0,
        "order_consistency": nan,
        "mixed_gender_bias": nan,
    }
    reasons = validity.verdict("demet", "mixed_gender_bias", echo, th).reasons
    assert [r.split(" ")[0] for r in reasons] == ["99.3%", "100.0%", "no", "mixed_gender_bias"]
    # a run made before the diagnostics existed is not read as bias
    old = {k: v for k, v in good.items() if k not in ("first_option_rate", "mixed_gender_bias_perm_p")}
    reasons = validity.verdict("demet_mc", "mixed_gender_bias", old, th).reasons
    assert [r.split(" ")[1] for r in reasons] == ["first_option_rate", "mixed_gender_bias_perm_p"]
    # the per-topic Eq. 2 reads its own p-value
    topic = {
        **good,
        "mixed_gender_bias_topic_money": 0.08,
        "mixed_gender_bias_topic_money_floor": 0.047,
        "mixed_gender_bias_topic_money_perm_p": 0.103,
    }
    assert "permutation p 0.103" in validity.verdict("demet_mc", "mixed_gender_bias_topic_money", topic, th).text()
    # name probe: answer checks only
    names = {"n_valid": 67, "invalid_rate": 0.553, "male_share_neutral": 1.0}
    assert validity.verdict("demet_names", "male_share_neutral", names, th).interpretable
    assert not validity.verdict("demet_names", "acc_woman", {**names, "n_valid": 12}, th).interpretable


def test_directions_of_the_pair_biases():
    res = {"n_valid": 500, "invalid_rate": 0.0, "first_option_rate": 0.5, "order_consistency": 0.6}

    def bias(name: str, value: float, lo: float, hi: float) -> dict:
        return {**res, name: value, f"{name}_ci_lo": lo, f"{name}_ci_hi": hi}

    wm, nm = "pair_bias_woman_man", "pair_bias_neutral_man"
    assert validity.direction("demet", wm, bias(wm, -0.3, -0.5, -0.1)) == "favours men over women"
    assert validity.direction("demet", nm, bias(nm, 0.1, -0.1, 0.3)).startswith("no clear direction")
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
    assert "| mixed_gender_bias | 95% CI | noise floor | excess | permutation p | verdict |" in text
    assert "Answer diagnostics: the first-listed option (NAME1) is chosen in **" in text
