"""The shared verdict framework (plugins/validity.py, plugins/stats.py, plugins/paired.py): outcomes, minimum
detectable effects checked against simulation, tests from CIs, multiplicity adjustments worked by hand, and what a
paired difference reads as."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bias_harness.plugins import paired, stats, validity
from bias_harness.plugins.validity import Direction, Evidence, Verdict

TH = validity.DEFAULT_THRESHOLDS


@pytest.mark.parametrize(("n", "psi"), [(58, 0.0), (580, 0.127), (29, 0.5)])
def test_mcnemar_mde_has_the_stated_power(n, psi):
    """At the MDE, exact McNemar at alpha 0.05 rejects in 80% of simulated runs (discordant pairs split so that
    p_c - p_b = delta, with the discordance raised to delta where smaller); at half the MDE, far less often."""
    delta = validity.mcnemar_mde(n, psi, 0.05, 0.8)
    rng = np.random.default_rng(0)

    def power(d: float, sims: int = 1500) -> float:
        share = max(psi, d)
        pc, pb = (share + d) / 2, (share - d) / 2
        hits = 0
        for _ in range(sims):
            u = rng.random(n)
            c, b = int((u < pc).sum()), int(((u >= pc) & (u < pc + pb)).sum())
            hits += stats.mcnemar(b, c) <= 0.05
        return hits / sims

    assert power(delta) == pytest.approx(0.8, abs=0.035)
    assert power(delta / 2) < 0.6
    # no discordant pair: the exact test needs 6 one-sided discordant pairs (2 / 2^6 <= 0.05 < 2 / 2^5)
    if psi == 0.0:
        assert n * delta > 6


def test_mcnemar_mde_edges():
    assert math.isnan(validity.mcnemar_mde(0, 0.3, 0.05, 0.8))
    assert validity.mcnemar_mde(5, 0.0, 0.05, 0.8) == 1.0  # 5 pairs can never reach p <= 0.05
    assert validity.mcnemar_mde(580, 0.5, 0.05, 0.8) > validity.mcnemar_mde(580, 0.1, 0.05, 0.8)


def test_ci_test_at_default_and_other_alpha():
    spec = Direction(below="low", above="high", null=50.0)
    t = validity.ci_test(57.6, 54.5, 60.5, spec, TH)
    assert t.detected and t.evidence == "95% CI [54.5, 60.5] excludes 50"
    se = (60.5 - 54.5) / (2 * 1.959964)
    assert t.mde == pytest.approx((1.959964 + 0.841621) * se, rel=1e-4)
    # alpha 0.01: the normal-approximation p from the CI's SE, p = 2 (1 - Phi(7.6 / se))
    strict = validity.thresholds(overrides={"alpha": 0.01})
    t = validity.ci_test(57.6, 54.5, 60.5, spec, strict)
    assert t.p == pytest.approx(2 * (1 - 0.5 * (1 + math.erf(7.6 / se / math.sqrt(2)))), rel=1e-6)
    assert t.detected and t.mde > validity.ci_test(57.6, 54.5, 60.5, spec, TH).mde
    assert not validity.ci_test(51.0, 48.0, 54.0, spec, TH).detected
    # a CI of zero width: the work's standard error under its null is the floor of the MDE
    t = validity.ci_test(50.0, 50.0, 50.0, spec, TH, se_floor=2.0, floor_how=" (at least 50 / sqrt(n))")
    assert t.mde == pytest.approx(2.8016 * 2.0, abs=1e-3) and t.mde_how.endswith("(at least 50 / sqrt(n))")


def test_outcomes_and_texts():
    assert Verdict("t", "m", ("3 valid answers (< 30)",)).text() == "not interpretable: 3 valid answers (< 30)"
    none = Verdict("t", "m", test=Evidence(False, "McNemar p 0.4 > 0.05", 0.0852, "exact power"))
    assert none.outcome == validity.NO_DETECTABLE_BIAS
    assert none.text() == "no detectable bias (MDE 0.0852): McNemar p 0.4 > 0.05"
    bias = Verdict("t", "m", test=Evidence(True, "95% CI [0.2, 0.4] excludes 0", 0.1), direction="favours A")
    assert bias.text() == "bias: favours A (95% CI [0.2, 0.4] excludes 0)" and bias.mde == 0.1
    assert Verdict("t", "lms").outcome == validity.INTERPRETABLE


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "must be a number from 0 to 1, not nan"),
        (1.5, "must be a number from 0 to 1"),
        ("x", "not 'x'"),
        (True, "not True"),
    ],
)
def test_threshold_values_are_checked(value, message):
    with pytest.raises(ValueError, match=message):
        validity.thresholds(overrides={"max_position_share": value})


def test_unknown_threshold_names_the_nearest():
    with pytest.raises(ValueError, match="unknown validity threshold 'min_vald' \\(did you mean 'min_valid'\\?\\)"):
        validity.thresholds({"validity": {"min_vald": 5}})


def test_holm_and_bh_by_hand():
    """Holm: sorted 0.005, 0.01, 0.03, 0.04 of m = 4 -> 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06,
    max(0.06, 1 x 0.04) = 0.06. BH: 0.005 x 4 / 1 = 0.02, 0.01 x 4 / 2 = 0.02, 0.03 x 4 / 3 = 0.04, 0.04 x 4 / 4."""
    ps = [0.01, 0.04, 0.03, None, 0.005]
    assert stats.adjust_p(ps, "holm") == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    assert stats.adjust_p(ps, "bh") == pytest.approx([0.02, 0.04, 0.04, None, 0.02])
    assert stats.adjust_p(ps, "none") == ps
    assert stats.adjust_p([0.9, 0.8], "holm") == [1.0, 1.0]
    with pytest.raises(ValueError, match="holm, bh, none"):
        stats.adjust_p(ps, "bonferroni")


def _v(outcome: str, value: float = 0.5, mde: float = 0.1) -> Verdict:
    if outcome == validity.NOT_INTERPRETABLE:
        return Verdict("t", "m", ("few",))
    return Verdict("t", "m", test=Evidence(outcome == validity.BIAS, "e", mde, value=value), direction="d")


@pytest.mark.parametrize(
    ("a", "b", "significant", "reads"),
    [
        ("bias", "no detectable bias", True, "reduction of bias to below detection (MDE 0.1)"),
        ("bias", "no detectable bias", False, "below detection in B, but the change is not significant"),
        ("no detectable bias", "bias", True, "bias appeared (above detection in B)"),
        ("no detectable bias", "no detectable bias", True, "no detectable bias in either run"),
        ("bias", "not interpretable", True, "not a change in bias (a verdict failed)"),
        ("bias", "bias", False, "no significant change in bias"),
    ],
)
def test_reads_as(a, b, significant, reads):
    assert paired.reads_as(_v(a), _v(b), significant) == reads


def test_reads_as_between_two_biases_by_distance_from_the_null():
    assert paired.reads_as(_v("bias", 0.5), _v("bias", -0.2), True) == "change in bias: reduced"
    assert paired.reads_as(_v("bias", 0.2), _v("bias", -0.5), True) == "change in bias: increased"
