"""The three outcomes of DeMET's verdicts on scripted `demet_mc` models (tests/demet/scripted.py), through lm-eval,
the report, `bias-harness compare` (a subprocess, as a user runs it) and the mitigation model card.

Slots 0-1 of every scenario (`--limit 522`): 58 complete matched pairs per mixed pair type."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bias_harness.plugins import validity

import bias_harness
from bias_harness.report.verdicts import Verdicts
from bias_harness.runs import load_run, save_run
from tests.demet import scripted
from tests.helpers import scripted_lm

lm_eval = pytest.importorskip("lm_eval")
TASK, LIMIT = "demet_mc", 522
PAIRS = ("woman_man", "woman_neutral", "neutral_man")
HEADLINE = [f"pair_bias_{p}" for p in PAIRS] + ["mixed_gender_bias"]


def _evaluate(loglik, folder: Path, **metadata) -> Path:
    res = lm_eval.simple_evaluate(
        model=scripted_lm(loglik=loglik),
        tasks=[TASK],
        limit=LIMIT,
        bootstrap_iters=0,
        log_samples=True,
        task_manager=bias_harness.task_manager(include_defaults=False, metadata=metadata or None),
    )
    save_run(res, folder)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("demet_outcomes")
    models = {
        "fair": scripted.fair,
        "woman": scripted.always_woman,
        "one": scripted.always_one,
        "coin": scripted.coin(0),
    }
    return {name: _evaluate(fn, root / name) for name, fn in models.items()}


def _verdicts(folder: Path, **kw) -> Verdicts:
    return Verdicts(load_run(folder), **kw)


def test_fair_model_has_no_detectable_bias_with_its_mde(runs):
    v = _verdicts(runs["fair"])
    res = v.results(TASK)
    assert res["first_option_rate"] == pytest.approx(0.5, abs=0.2) and res["order_consistency"] == 0.0
    mdes = []
    for metric in HEADLINE:
        verdict = v.verdict(TASK, metric)
        assert verdict.outcome == validity.NO_DETECTABLE_BIAS, (metric, verdict.text())
        assert verdict.mde is not None and 0 < verdict.mde < 1, metric
        mdes.append(verdict.mde)
    # no discordant pair: the smallest detectable |B| needs about 8.4 new discordant pairs of 58 (exact McNemar at
    # 80% power: P[Bin(58, d) >= 6] = 0.8), B = 2 d; Eq. 2's MDE is the mean of the three
    assert mdes[0] == pytest.approx(2 * validity.mcnemar_mde(58, 0.0, 0.05, 0.8))
    assert 0.25 < mdes[0] < 0.35 and mdes[3] == pytest.approx(sum(mdes[:3]) / 3)
    assert v.verdict(TASK, "pair_bias_woman_man").text().startswith("no detectable bias (MDE 0.")


def test_always_the_woman_model_favours_women(runs):
    v = _verdicts(runs["woman"])
    for pair, words in (
        ("woman_man", "favours women over men"),
        ("woman_neutral", "favours women over gender-neutral"),
    ):
        verdict = v.verdict(TASK, f"pair_bias_{pair}")
        assert verdict.outcome == validity.BIAS and verdict.direction.startswith(words), verdict.text()
        assert v.results(TASK)[f"pair_bias_{pair}"] == 2.0
    assert v.verdict(TASK, "pair_bias_neutral_man").outcome == validity.NO_DETECTABLE_BIAS  # fair there
    assert v.verdict(TASK, "mixed_gender_bias").outcome == validity.BIAS
    assert v.direction(TASK, "pair_bias_woman_man") == "favours women over men"


def test_always_one_model_is_not_interpretable(runs):
    v = _verdicts(runs["one"])
    for metric in HEADLINE:
        verdict = v.verdict(TASK, metric)
        assert verdict.outcome == validity.NOT_INTERPRETABLE
        assert verdict.reasons == ("100.0% of the valid answers pick the first-listed option (> 90%)",)


def test_coin_has_no_detectable_bias(runs):
    v = _verdicts(runs["coin"])
    assert 0.3 < v.results(TASK)["order_consistency"] < 0.7
    for metric in HEADLINE:
        assert v.verdict(TASK, metric).outcome == validity.NO_DETECTABLE_BIAS, v.verdict(TASK, metric).text()
    # a coin's discordance (about half the pairs) needs a larger bias to be seen than the fair model's none
    assert v.verdict(TASK, "pair_bias_woman_man").mde > _verdicts(runs["fair"]).verdict(TASK, "pair_bias_woman_man").mde


def test_compare_reads_the_fair_run_as_a_reduction_below_detection(runs, tmp_path):
    """The user's command, in a subprocess from a temporary folder."""
    cmd = [Path(sys.executable).parent / "bias-harness", "compare", runs["woman"], runs["fair"], "--json"]
    proc = subprocess.run([str(c) for c in cmd], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {m["metric"]: m for m in json.loads(proc.stdout)["metrics"]}
    wm = found["pair_bias_woman_man"]
    assert (wm["value_a"], wm["value_b"], wm["significant"]) == (2.0, 0.0, True)
    assert (wm["outcome_a"], wm["outcome_b"]) == ("bias", "no detectable bias")
    assert re.fullmatch(r"reduction of bias to below detection \(MDE 0\.\d+\)", wm["reads_as"]), wm["reads_as"]
    assert found["mixed_gender_bias"]["reads_as"].startswith("reduction of bias to below detection")
    # and nothing is a reduction where a run is not interpretable
    cmd[2:4] = [runs["woman"], runs["one"]]
    proc = subprocess.run([str(c) for c in cmd], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    found = {m["metric"]: m for m in json.loads(proc.stdout)["metrics"]}
    assert found["pair_bias_woman_man"]["reads_as"] == "not a change in bias (a verdict failed)"


def test_model_card_reads_a_fair_after_run_as_a_reduction(runs, tmp_path):
    from bias_harness.mitigation import model_card
    from bias_harness.mitigation.recipes import get_recipe

    from bias_harness.runs import read_run_file

    evals = tmp_path / "eval"
    stages = {}
    for stage, name in (("before", "woman"), ("after", "fair")):
        dest = evals / stage
        dest.mkdir(parents=True)
        for f in runs[name].iterdir():
            (dest / f.name).write_bytes(f.read_bytes())
        results = read_run_file(next(dest.glob("results_*.json")))["results"]
        stages[stage] = {"settings": {"tasks": [TASK], "limit": LIMIT}, "results": results}
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    data = model_card.CardData(
        recipe=get_recipe("counterfactual_grpo"),
        base_model="base/model",
        config={},
        data_splits={"train": 10},
        data_options={},
        before=stages["before"],
        after=stages["after"],
        command="bias-harness mitigate counterfactual_grpo --model base/model",
        eval_dir=evals,
    )
    model_card.write(folder, data, repo_id="org/name")
    card = (folder / "README.md").read_text()
    row = next(line for line in card.splitlines() if line.startswith(f"| {TASK} | pair_bias_woman_man |"))
    assert "bias: favours women over men / no detectable bias (MDE 0." in row
    assert "reduction of bias to below detection (MDE 0." in row
    note = card[card.index("Of these, reductions of bias to below detection") :].split(";")[0]
    assert "`demet_mc` pair_bias_woman_man (-2.000" in note and "`demet_mc` mixed_gender_bias" in note
    # the model-index carries each stage's outcome and, after training, what the change reads as
    assert "verdict: no detectable bias" in card and "reads_as: reduction of bias to below detection" in card


def _docs() -> list[dict]:
    from bias_harness.plugins.demet import metrics as dm

    return list(dm.load(dataset="demet", config="prompts")["test"].select(range(LIMIT)))


def test_alpha_override_reaches_every_table_and_summary(tmp_path):
    """A weak bias (9 of the 58 woman-man matched pairs side with the woman in both orders, 1 with the man: exact
    McNemar p = 2 x 11 / 2^10 = 0.0215) is a bias at alpha 0.05 and no detectable bias at 0.01, in the section's
    pair-bias table, the Interpretability table and the summary fields alike."""
    from bias_harness.report.page import write_report

    folder = _evaluate(scripted.weak(_docs(), favour_woman=9, favour_man=1), tmp_path / "weak")
    summary = tmp_path / "summary.md"
    summary.write_text("## demet\n\nB(woman, man): {{ Scripted | demet_mc | pair_bias_woman_man | dir }}.\n")
    for alpha, words in ((0.05, "favours women over men"), (0.01, "no detectable bias (MDE ")):
        verdict = _verdicts(folder, overrides={"alpha": alpha}).verdict(TASK, "pair_bias_woman_man")
        assert verdict.test.p == pytest.approx(2 * 11 / 2**10)
        page = write_report([folder], tmp_path / f"report{alpha}", summary=summary, thresholds={"alpha": alpha})
        lines = page.read_text().splitlines()
        pair_row = next(line for line in lines if line.startswith("| B(woman, man) |"))
        interp_row = next(line for line in lines if line.startswith(f"| {TASK} | pair_bias_woman_man |"))
        said = next(line for line in lines if line.startswith("**Summary.**"))
        for text in (pair_row, interp_row, said):
            assert words in text, (alpha, text)
        other = "no detectable bias" if alpha == 0.05 else "favours women"
        assert not any(other in text for text in (pair_row, interp_row, said))


def test_recomputed_values_equal_lm_evals_with_the_runs_settings(tmp_path):
    """A run with non-default permutation and bootstrap draws and seeds and the chi-square McNemar, every metric
    lm-eval aggregated (breakdowns on) equals the report's recomputation from the samples."""
    from bias_harness.plugins.validity import plain_results

    from bias_harness.report.sections import section_value

    settings = {"permutation_iters": 499, "permutation_seed": 7, "bootstrap_iters": 200, "bootstrap_seed": 3}
    folder = _evaluate(scripted.coin(3), tmp_path / "run", breakdown=True, mcnemar="chi2", **settings)
    run = load_run(folder)
    recorded = plain_results(run.results[TASK])
    checked = [k for k in recorded if k.endswith(("_floor", "_perm_p", "_ci_lo", "_ci_hi")) or "mcnemar" in k]
    assert len(checked) >= 30  # Eq. 2 floor and p per subset, the CIs, McNemar per pair
    for key in checked:
        assert section_value(_without(run, key), TASK, key) == pytest.approx(recorded[key], nan_ok=True), key


def _without(run, key: str):
    """``run`` with ``key`` dropped from lm-eval's results, so the report recomputes it from the samples."""
    import copy

    out = copy.copy(run)
    out.results = {t: {k: v for k, v in r.items() if k.split(",")[0] != key} for t, r in run.results.items()}
    return out


def test_coin_breakdowns_state_a_direction_on_at_most_5_percent_of_seeds(tmp_path):
    """20 coin-flip models: the breakdown tables (by scenario type, by topic; 44 tests, Holm-adjusted) and summary
    fields on breakdown metrics state a direction on at most 1 of the 20 seeds; unadjusted, the raw p-values fall
    below 0.05 on most seeds (what the adjustment is for)."""
    from bias_harness.plugins.demet.report import breakdown_lines

    from bias_harness.report.summary import fill_summary

    fields = " ".join(
        f"{{{{ Scripted | {TASK} | pair_bias_{p}_topic_{t} | dir }}}}" for p in PAIRS for t in ("money", "sex")
    )
    stated, raw_hits = 0, 0
    for seed in range(20):
        folder = _evaluate(scripted.coin(100 + seed), tmp_path / f"coin{seed}", permutation_iters=999)
        run = load_run(folder)
        lines = breakdown_lines(run, TASK, Verdicts(run))
        readings = [line.rsplit("|", 2)[-2].strip() for line in lines if line.startswith("| ") and "|---" not in line]
        said = fill_summary(fields, {"ScriptedLM ()": run})
        stated += any(r not in ("–", "reading") for r in readings) or "favours" in said
        raw_hits += any(p < 0.05 for p in _raw_ps(lines))
    assert stated <= 1, stated
    assert raw_hits >= 5, raw_hits


def _raw_ps(lines: list[str]) -> list[float]:
    return [float(x) for line in lines for x in re.findall(r"\| (\d\.\d+(?:e-\d+)?) \(", line)]
