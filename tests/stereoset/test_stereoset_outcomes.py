"""The three outcomes of StereoSet's verdicts on scripted models through lm-eval and the report: a model that scores
the stereotype and the anti-stereotype alike gets "no detectable bias" on ss with its minimum detectable effect, one
that prefers the stereotype "stereotypical", one that prefers the anti-stereotype "anti-stereotypical", one that
prefers the unrelated candidate (lms at 0) "not interpretable"; lms and icat are measurements ("interpretable").

`stereoset_en_combined --limit 400`: 200 intrasentence and 200 intersentence contexts (interleaved)."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import pytest
from bias_harness.plugins import validity as v

import bias_harness
from bias_harness.report.verdicts import Verdicts
from bias_harness.runs import load_run, save_run
from tests.helpers import scripted_lm

lm_eval = pytest.importorskip("lm_eval")
TASK, LIMIT = "stereoset_en_combined", 400
K = v.z(0.975) + v.z(0.8)


@cache
def _docs() -> list[dict]:
    from bias_harness.plugins.stereoset.task import load_docs

    return list(load_docs("stereoset_en", ["intrasentence", "intersentence"])["validation"])


def _scored(scores: tuple[float, float, float]):
    """Fixed log-likelihoods of (stereotype, anti-stereotype, unrelated) for every context."""
    table = {(d["prompt"], c): s for d in _docs() for c, s in zip(d["choices"], scores)}
    return lambda ctx, cont: table[(ctx, cont)]


def _evaluate(loglik, folder: Path, **metadata) -> Path:
    res = lm_eval.simple_evaluate(
        model=scripted_lm(loglik=loglik),
        tasks=[TASK],
        limit=LIMIT,
        log_samples=True,
        task_manager=bias_harness.task_manager(include_defaults=False, metadata={"normalization": "sum", **metadata}),
    )
    save_run(res, folder)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stereoset_outcomes")
    return {
        # stereotype and anti-stereotype alike (a tie counts 1/2: ties half), the unrelated candidate last
        "alike": _evaluate(_scored((-1.0, -1.0, -3.0)), root / "alike", ties="half"),
        "stereotype": _evaluate(_scored((-1.0, -2.0, -3.0)), root / "stereotype"),
        "anti": _evaluate(_scored((-2.0, -1.0, -3.0)), root / "anti"),
        "unrelated": _evaluate(_scored((-2.0, -3.0, -1.0)), root / "unrelated"),
    }


def test_alike_scores_are_no_detectable_bias_with_the_null_se_as_the_mde(runs):
    verdicts = Verdicts(load_run(runs["alike"]))
    res = verdicts.results(TASK)
    assert (res["lms"], res["ss"], res["ss_ci_lo"], res["ss_ci_hi"]) == (100.0, 50.0, 50.0, 50.0)
    assert (res["n_scored"], res["n_scored_intra"], res["n_scored_inter"]) == (400.0, 200.0, 200.0)
    # a CI of zero width says nothing about how small a preference could have shown: the SE is 50 / sqrt(n), the
    # standard error of a share of n contexts at 50%; MDE = (z_0.975 + z_0.8) x 50 / sqrt(n)
    ss = verdicts.verdict(TASK, "ss")
    assert ss.outcome == v.NO_DETECTABLE_BIAS and ss.mde == pytest.approx(K * 50 / 20) == pytest.approx(7.004, abs=1e-3)
    assert (
        ss.text() == ("no detectable bias (MDE 7): 95% CI [50, 50] includes 50")
        and "at least 50 / sqrt(n scored contexts)" in ss.why()
    )
    for part in ("intra", "inter"):  # StereoSet's two columns, each over its 200 contexts
        verdict = verdicts.verdict(TASK, f"ss_{part}")
        assert verdict.outcome == v.NO_DETECTABLE_BIAS and verdict.mde == pytest.approx(K * 50 / math.sqrt(200))
    for metric in ("lms", "icat", "lms_intra", "icat_inter"):  # no null value: measurements
        assert verdicts.verdict(TASK, metric).outcome == v.INTERPRETABLE, metric


@pytest.mark.parametrize(
    ("run", "ss", "words"),
    [
        ("stereotype", 100.0, "stereotypical (the stereotype preferred)"),
        ("anti", 0.0, "anti-stereotypical (the anti-stereotype preferred)"),
    ],
)
def test_a_preference_is_a_bias_with_its_direction(runs, run, ss, words):
    verdicts = Verdicts(load_run(runs[run]))
    assert verdicts.results(TASK)["ss"] == ss
    for metric in ("ss", "ss_intra", "ss_inter"):
        verdict = verdicts.verdict(TASK, metric)
        assert verdict.outcome == v.BIAS and verdict.direction == words, metric
    assert verdicts.direction(TASK, "ss") == words


def test_preferring_the_unrelated_candidate_is_not_interpretable(runs):
    verdicts = Verdicts(load_run(runs["unrelated"]))
    assert verdicts.results(TASK)["lms"] == 0.0
    reason = (
        "lms 95% CI 0.0 to 0.0 is not above 50: the model does not tell meaningful sentences from unrelated ones, so "
        "ss says nothing about stereotypes"
    )
    for metric in ("ss", "ss_intra", "icat"):
        assert verdicts.verdict(TASK, metric).reasons == (reason,), metric
    assert verdicts.verdict(TASK, "lms").outcome == v.INTERPRETABLE  # lms itself is what it is


def test_recomputed_values_equal_lm_evals_with_the_runs_settings(tmp_path):
    """Non-default scoring settings (contexts pooled, a tie worth 1/2; headline: intra, which leaves the
    intersentence contexts out of the pooled scores but not out of the split's): every breakdown lm-eval aggregates
    with the switch equals the report's recomputation from the samples of the run without it."""
    import zlib

    from bias_harness.plugins.stereoset.report import metric_value
    from bias_harness.plugins.validity import plain_results

    def loglik(ctx: str, cont: str) -> float:  # a tie in about a third of the candidates' comparisons
        return -float(zlib.crc32(f"{ctx}|{cont}".encode()) % 3)

    settings = {"averaging": "example", "ties": "half", "headline": "intra"}
    plain = load_run(_evaluate(loglik, tmp_path / "plain", **settings))
    full = plain_results(load_run(_evaluate(loglik, tmp_path / "full", breakdown=True, **settings)).results[TASK])
    assert {k: plain.settings(TASK)[k] for k in settings} == settings
    extra = [k for k in full if k not in plain_results(plain.results[TASK]) and k not in ("inter_nsp_rate", "alias")]
    assert {"n_scored", "n_scored_intra", "ss_inter_ci_lo", "ss_gender", "icat_ci_hi"} <= set(extra)
    for name in extra:
        assert metric_value(plain, TASK, name) == pytest.approx(full[name], nan_ok=True), name
    # headline intra: the pooled ss counts the 200 intrasentence contexts, the split's CI its own part's
    assert (full["n_scored"], full["n_scored_inter"]) == (200.0, 200.0)
    assert not math.isnan(full["ss_inter_ci_lo"])
