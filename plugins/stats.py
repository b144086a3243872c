"""Statistics shared by the tasks: bootstrap confidence intervals and McNemar's test."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")

BOOTSTRAP_ITERS = 1000
BOOTSTRAP_SEED = 1234


def bootstrap_ci(
    units: Sequence[T],
    statistic: Callable[[Sequence[T]], float],
    iters: int = BOOTSTRAP_ITERS,
    alpha: float = 0.05,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` over ``units`` resampled with replacement.

    ``units`` are the independent sampling units (e.g. matched pairs, progressions); the statistic is
    recomputed on each resample. Deterministic for a given seed. Returns (nan, nan) for no units.
    """
    n = len(units)
    if n == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(iters):
        idx = rng.integers(0, n, size=n)
        value = statistic([units[i] for i in idx])
        if not math.isnan(value):
            stats.append(value)
    if not stats:
        return (math.nan, math.nan)
    lo, hi = np.percentile(stats, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return (float(lo), float(hi))


def mean_ci(values: Sequence[float], **kwargs) -> tuple[float, float]:
    """Bootstrap CI of the mean of ``values`` (NaNs removed)."""
    vals = [v for v in values if not math.isnan(v)]
    return bootstrap_ci(vals, lambda s: float(np.mean(s)) if len(s) else math.nan, **kwargs)


def mcnemar(b: int, c: int, exact: bool = True) -> float:
    """Two-sided p-value of McNemar's test from the discordant counts ``b`` and ``c``.

    ``exact=True``: the binomial form, p = min(1, 2 * P[X <= min(b, c)]) with X ~ Bin(b + c, 1/2).
    ``exact=False``: chi-square with continuity correction, (|b - c| - 1)^2 / (b + c), 1 d.o.f.
    No discordant pairs gives p = 1.
    """
    n = b + c
    if n == 0:
        return 1.0
    if exact:
        k = min(b, c)
        cdf = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        return float(min(1.0, 2 * cdf))
    from scipy.stats import chi2

    stat = (abs(b - c) - 1) ** 2 / n
    return float(chi2.sf(stat, 1))
