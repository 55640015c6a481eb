"""The report's own statistics: Wilson intervals, the exact sign test, bootstrap means, p95.

Everything else (G, K, dU and their paired bootstrap intervals) comes from
:mod:`descriptor.economics`, never recomputed here. ``tests/test_report_stats.py``
checks these functions against scipy on fixed data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
"""Two-sided 95 % standard normal quantile."""


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n`` (no continuity correction).

    ``(0.0, 1.0)`` when ``n == 0``. Same numbers as scipy's
    ``binomtest(k, n).proportion_ci(method="wilson")``.

    >>> [round(x, 4) for x in wilson_interval(5, 6)]
    [0.4365, 0.9699]
    """
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # Clamp: at k = 0 or k = n the exact bound is 0 or 1; rounding must not push it past.
    return max(0.0, centre - half), min(1.0, centre + half)


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


def bootstrap_mean_ci(values: Sequence[float], *, seed: int, n_boot: int = 2000,
                      level: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` (numpy ``linear`` percentiles, seeded).

    Used for the report's cost error bars (mean tokens per run, resampling
    tasks). A single value gives a zero-width interval.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    a = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [a, 100 - a], method="linear")
    return float(lo), float(hi)


def p95(values: Sequence[float]) -> float | None:
    """numpy ``linear`` 95th percentile (None for no values), as in the task descriptor."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), 95, method="linear"))
