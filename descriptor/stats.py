"""The project's statistics, each edge case decided once: means, p95, Wilson, the sign test, the bootstrap.

Every number the summaries, economics, plots, report and rollback experiment
print with an interval comes from here. The rules:

- **Quantiles**: numpy's ``linear`` method (Hyndman-Fan type 7); no values -> None.
- **Wilson interval** (95 %, ``z = Z95``, no continuity correction): ``(0.0, 1.0)`` at ``n = 0``
  (no runs rule nothing out); bounds clamped to [0, 1].
- **Sign test**: exact two-sided binomial test at p = 1/2 over paired units, ties (within ``tol``)
  dropped, p = 1.0 when every unit ties.
- **Bootstrap**: percentile intervals (numpy ``linear``) over ``n_boot`` resamples of the *units*
  (tasks) drawn as one index matrix by :func:`resample_indices`, so every statistic of the same
  units is paired (resampled together); seeded; no values, or a non-finite resample -> ``(None, None)``.

Why not scipy here: ``scipy.stats`` takes ~1 s to import on the project's 2-core machine (measured
0.99 s after numpy, 1.4 s with ``scipy.special``), and every ``run`` writes a report; Wilson and the
sign test are closed forms, the sign test exact in integers. ``tests/descriptor/test_stats.py`` holds them equal to
``scipy.stats.binomtest`` on fixed data. scipy's own ``bootstrap`` draws its resamples differently and
would change every published interval, so the resampling scheme stays this one (the report's, since
the start).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported by the bootstrap's functions only: the task descriptors' workers never
    import numpy as np  # need it (~0.15 s of every summary's start-up before they fork)

Z95 = 1.959963984540054
"""Two-sided 95 % standard normal quantile."""

Interval = tuple[float | None, float | None]
"""A (low, high) interval; ``(None, None)`` when there is none."""


def mean(xs: Sequence[float]) -> float:
    """Arithmetic mean (``sum / n``); callers guarantee ``n >= 1``.

    >>> mean([1.0, 2.0, 6.0])
    3.0
    """
    return sum(xs) / len(xs)


def pvariance(xs: Sequence[float]) -> float:
    """Population variance: mean squared deviation from the mean (divide by N).

    >>> pvariance([1.0, 3.0])
    1.0
    """
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)


def quantile(xs: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0 <= q <= 1), numpy ``linear`` method (Hyndman-Fan type 7); None for no values.

    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.5), quantile([], 0.5)
    (2.5, None)
    """
    if len(xs) == 0:
        return None
    v = sorted(float(x) for x in xs)
    return math.nan if any(math.isnan(x) for x in v) else _linear(v, (100 * q) / 100)


def _linear(v: Sequence[float], q: float) -> float:
    """numpy's ``linear`` quantile of the sorted, NaN-free, non-empty ``v`` at ``q`` (0..1), its arithmetic
    step by step in floats, so bit-identical (a test compares): ``np.percentile`` cost ~1 ms a call on a few
    values, and its first call imports ``numpy.ma`` (~50 ms) in every process that summarises tasks."""
    at = (len(v) - 1) * q
    if at >= len(v) - 1:
        return float(v[-1])
    i = max(math.floor(at), 0)
    a, b, gamma = float(v[i]), float(v[i + 1]), at - i
    return b - (b - a) * (1 - gamma) if gamma >= 0.5 else a + (b - a) * gamma


def p95(xs: Sequence[float]) -> float | None:
    """95th percentile (:func:`quantile` at 0.95): latency p95 in ms of the descriptor and the report.

    >>> p95([0.0, 100.0]), p95([])
    (95.0, None)
    """
    return quantile(xs, 0.95)


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n`` (no continuity correction).

    ``(0.0, 1.0)`` when ``n == 0``. Same numbers as scipy's
    ``binomtest(k, n).proportion_ci(method="wilson")``.

    >>> [round(x, 4) for x in wilson_interval(5, 6)], wilson_interval(0, 0)
    ([0.4365, 0.9699], (0.0, 1.0))
    """
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # Clamp: at k = 0 or k = n the exact bound is 0 or 1; rounding must not push it past.
    return max(0.0, centre - half), min(1.0, centre + half)


def poisson_binomial_test(k: int, probs: Sequence[float]) -> float:
    """Two-sided exact p-value of ``k`` successes in independent trials with success probabilities ``probs``.

    The distribution of the count is computed exactly (a convolution, O(n²)); the p-value sums the
    probabilities of every count no more likely than ``k`` (with a relative tolerance of 1e-7), scipy's
    ``binomtest`` rule, whose p-value it equals when every probability is the same. 1.0 with no trials.

    >>> round(poisson_binomial_test(10, [0.5] * 10), 6), poisson_binomial_test(0, [])
    (0.001953, 1.0)
    """
    if not probs:
        return 1.0
    dist = [1.0]
    for p in probs:
        nxt = [0.0] * (len(dist) + 1)
        for i, q in enumerate(dist):
            nxt[i] += q * (1 - p)
            nxt[i + 1] += q * p
        dist = nxt
    if not 0 <= k < len(dist):
        raise ValueError(f"k = {k} is outside 0..{len(probs)}")
    cutoff = dist[k] * (1 + 1e-7)
    return min(1.0, sum(q for q in dist if q <= cutoff))


@dataclass(kw_only=True, slots=True, frozen=True)
class SignTest:
    """Exact two-sided sign test over paired units (tasks); ties are dropped."""

    better: int
    """Units where the first system's value is higher."""
    worse: int
    tied: int
    p_value: float
    """Two-sided binomial p-value of ``better`` among ``better + worse`` at p = 1/2 (1.0 when all tie)."""


def sign_test(diffs: Sequence[float], tol: float = 1e-12) -> SignTest:
    """Sign test of paired differences (ties within ``tol`` dropped).

    p = min(1, 2 * P(X <= min(b, w))) for X ~ Binomial(b + w, 1/2), which is
    what scipy's ``binomtest(b, b + w).pvalue`` gives for p = 1/2.

    >>> sign_test([0.5, 0.25, 0.0, 1.0, 0.33]).p_value
    0.125
    """
    better = sum(1 for d in diffs if d > tol)
    worse = sum(1 for d in diffs if d < -tol)
    tied = len(diffs) - better - worse
    n = better + worse
    if n == 0:
        return SignTest(better=0, worse=0, tied=tied, p_value=1.0)
    k = min(better, worse)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return SignTest(better=better, worse=worse, tied=tied, p_value=min(1.0, 2 * tail))


def resample_indices(n_units: int, *, seed: int | Sequence[int], n_boot: int = 2000) -> np.ndarray:
    """``(n_boot, n_units)`` unit indices drawn with replacement: one bootstrap resample per row.

    Index every per-unit array of the same units with the one matrix so their
    statistics are resampled together (paired). ``seed`` is numpy's
    ``default_rng`` seed (an int, or ints such as ``[seed, crc32(name)]``).

    >>> resample_indices(3, seed=0, n_boot=2).shape
    (2, 3)
    """
    import numpy as np

    return np.random.default_rng(seed).integers(0, n_units, size=(n_boot, n_units))


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> Interval:
    """Central ``level`` percentile interval of bootstrap ``samples`` (numpy ``linear``).

    ``(None, None)`` when there are no samples or any is not finite (a ratio undefined on some resample).

    >>> import numpy as np
    >>> percentile_interval(np.arange(5.0), 0.5), percentile_interval(np.array([]))
    ((1.0, 3.0), (None, None))
    """
    import numpy as np

    if samples.size == 0 or not np.all(np.isfinite(samples)):
        return None, None
    a = (1 - level) / 2 * 100
    v = np.sort(samples, axis=None)
    return _linear(v, a / 100), _linear(v, (100 - a) / 100)


def bootstrap_mean_ci(values: Sequence[float], *, seed: int | Sequence[int] = 0, n_boot: int = 2000,
                      level: float = 0.95) -> Interval:
    """Percentile-bootstrap interval of the mean of ``values`` (one value per unit, e.g. per task).

    A single value gives a zero-width interval; no values give ``(None, None)``.

    >>> bootstrap_mean_ci([2.0], seed=0), bootstrap_mean_ci([], seed=0)
    ((2.0, 2.0), (None, None))
    """
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return None, None
    return percentile_interval(v[resample_indices(v.size, seed=seed, n_boot=n_boot)].mean(axis=1), level)
