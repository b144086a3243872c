"""Shared statistics (plugins/stats.py): the sign-flip permutation null, its p-value, the exact binomial CI."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from bias_harness.plugins import stats


def _mean_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(draws, 2) totals of (sum, n) per side -> mean of side b minus mean of side a."""
    return b[:, 0] / b[:, 1] - a[:, 0] / a[:, 1]


def test_sign_flip_null_matches_the_enumerated_null():
    """Three matched pairs with differences 2, 2, 0 (one answer per side): the exact null of the mean difference has
    the 2^3 sign patterns equally likely: values (+-2 +-2 + 0) / 3 -> 4/3 (1/4), 0 (1/2), -4/3 (1/4)."""
    side_a = np.array([[-1, 1], [-1, 1], [1, 1]], dtype=float)  # (score, count) of the g1_g2 answer per pair
    side_b = np.array([[1, 1], [1, 1], [1, 1]], dtype=float)
    null = stats.sign_flip_null(side_a, side_b, _mean_diff, iters=20000, seed=7)
    assert null.shape == (20000,)
    exact = {}
    for flips in itertools.product((0, 1), repeat=3):  # independent enumeration: swap the chosen pairs' sides
        a = np.where(np.array(flips)[:, None] == 1, side_b, side_a).sum(axis=0)
        b = np.where(np.array(flips)[:, None] == 1, side_a, side_b).sum(axis=0)
        value = round(b[0] / b[1] - a[0] / a[1], 9)
        exact[value] = exact.get(value, 0) + 1 / 8
    assert exact == pytest.approx({round(4 / 3, 9): 0.25, 0.0: 0.5, round(-4 / 3, 9): 0.25})
    for value, prob in exact.items():
        assert np.mean(np.isclose(null, value)) == pytest.approx(prob, abs=0.015)  # 20000 draws: sd <= 0.0035
    # deterministic for a seed, different for another
    assert np.array_equal(null, stats.sign_flip_null(side_a, side_b, _mean_diff, iters=20000, seed=7))
    assert not np.array_equal(null, stats.sign_flip_null(side_a, side_b, _mean_diff, iters=20000, seed=8))


def test_sign_flip_null_moves_a_lone_answer_with_its_pair():
    """A pair with one side invalid (count 0) moves its only answer to the other side when flipped."""
    side_a = np.array([[-1, 1], [0, 0]], dtype=float)
    side_b = np.array([[1, 1], [1, 1]], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        null = stats.sign_flip_null(side_a, side_b, _mean_diff, iters=4000, seed=1)
    # no flip: b = (1+1)/2 = 1, a = -1 -> 2; flip pair 0 only: b = (-1+1)/2 = 0, a = 1 -> -1; flip pair 1 only:
    # b = 1, a = (-1+1)/2 = 0 -> 1; both: b = -1, a = (1+1)/2 = 1 -> -2. All four defined, each 1/4.
    assert sorted(set(np.round(null, 9))) == [-2.0, -1.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="one shape"):
        stats.sign_flip_null(side_a, side_b[:1], _mean_diff)


def test_permutation_p_counts_ties_and_adds_one():
    assert stats.permutation_p(2.0, [1.0, 2.0, 3.0, math.nan]) == pytest.approx((2 + 1) / (3 + 1))  # 2 and 3 >= 2
    assert stats.permutation_p(5.0, [1.0, 2.0, 3.0]) == pytest.approx(1 / 4)  # none as large: the +1 floor
    assert stats.permutation_p(0.1 + 0.2, [0.3]) == 1.0  # 0.30000000000000004 vs 0.3: a tie, not a miss
    assert math.isnan(stats.permutation_p(math.nan, [1.0]))


def test_proportion_ci_is_clopper_pearson():
    # k = n: the lower bound solves p^n = alpha / 2; k = 0: the upper bound solves (1 - p)^n = alpha / 2
    assert stats.proportion_ci(10, 10) == pytest.approx((0.025 ** (1 / 10), 1.0))
    assert stats.proportion_ci(0, 10) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)))
    # k = 5 of 10: the published Clopper-Pearson interval 0.1871 - 0.8129
    assert stats.proportion_ci(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert all(math.isnan(x) for x in stats.proportion_ci(0, 0))
