"""Statistics shared by the tasks: bootstrap confidence intervals, McNemar's test, a sign-flip permutation null
over matched pairs, and an exact binomial confidence interval."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")

BOOTSTRAP_ITERS = 1000
BOOTSTRAP_SEED = 1234
PERMUTATION_ITERS = 9999
PERMUTATION_SEED = 1234
_CHUNK = 1000  # draws per matrix product (bounds memory: chunk x units booleans)


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


def sign_flip_null(
    side_a: np.ndarray,
    side_b: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    iters: int = PERMUTATION_ITERS,
    seed: int = PERMUTATION_SEED,
) -> np.ndarray:
    """Draws of ``statistic`` under the null that the two sides of every matched pair are exchangeable.

    ``side_a`` and ``side_b`` are (units, k) arrays: per matched pair (a unit), the sufficient statistics of its two
    sides (e.g. score sum and count per column). Each draw swaps the sides of every unit with probability 1/2,
    independently (for one answer per side, swapping is flipping the sign of the pair's difference; a side with no
    valid answer travels with its unit), sums the units into (draws, k) totals A and B, and evaluates
    ``statistic(A, B)`` -> (draws,) values. Deterministic for a given seed. NaN draws (a statistic undefined on a
    draw) are returned as NaN.
    """
    a, b = np.asarray(side_a, dtype=float), np.asarray(side_b, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"sign_flip_null: the sides must be (units, k) arrays of one shape, not {a.shape}, {b.shape}")
    rng = np.random.default_rng(seed)
    tot_a, tot = a.sum(axis=0), (a + b).sum(axis=0)
    diff = b - a
    out = []
    for start in range(0, iters, _CHUNK):
        flips = rng.integers(0, 2, size=(min(_CHUNK, iters - start), len(a))).astype(float)
        draw_a = tot_a + flips @ diff  # a flipped unit contributes its b side to A
        out.append(np.asarray(statistic(draw_a, tot - draw_a), dtype=float))
    return np.concatenate(out) if out else np.array([])


def permutation_p(observed: float, null: Sequence[float] | np.ndarray) -> float:
    """One-sided permutation p-value of ``observed`` against ``null`` draws (larger = more extreme), with the +1
    correction: (#{draws >= observed} + 1) / (draws + 1). NaN draws are left out; nan for a nan ``observed``.
    Draws equal to ``observed`` up to float rounding count as at least as extreme."""
    draws = np.asarray(null, dtype=float)
    draws = draws[~np.isnan(draws)]
    if math.isnan(observed):
        return math.nan
    extreme = int(np.sum(draws >= observed - 1e-9 * max(1.0, abs(observed))))
    return (extreme + 1) / (len(draws) + 1)


def proportion_ci(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Clopper-Pearson (exact binomial) CI of the proportion ``k / n``; (nan, nan) for ``n == 0``. For a share of
    few units (e.g. 10 names), where a percentile bootstrap collapses to a point at 0 or 1."""
    if n == 0:
        return (math.nan, math.nan)
    from scipy.stats import beta

    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return (lo, hi)


ADJUSTMENTS = ("holm", "bh", "none")


def adjust_p(pvalues: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """Multiplicity-adjusted p-values of one family of tests (e.g. the rows of one breakdown table), in the input's
    order; ``None`` / NaN entries are no test and stay as they are (and are not counted in the family).

    ``holm``: Holm's step-down adjustment (Holm 1979), which controls the family-wise error rate: the i-th smallest of
    m p-values becomes max_{j<=i} min(1, (m - j + 1) p_(j)). ``bh``: Benjamini-Hochberg (1995), which controls the
    false discovery rate: p_(i) m / i, made monotone from the largest down. ``none``: unchanged."""
    if method not in ADJUSTMENTS:
        raise ValueError(f"multiplicity adjustment must be one of {', '.join(ADJUSTMENTS)}, not {method!r}")
    idx = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    out: list[float | None] = list(pvalues)
    m = len(idx)
    if method == "none" or m == 0:
        return out
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type,return-value]
    if method == "holm":
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * float(pvalues[i])))  # type: ignore[arg-type]
            out[i] = running
    else:
        running = 1.0
        for rank in range(m - 1, -1, -1):
            i = order[rank]
            running = min(running, float(pvalues[i]) * m / (rank + 1))  # type: ignore[arg-type]
            out[i] = min(1.0, running)
    return out
