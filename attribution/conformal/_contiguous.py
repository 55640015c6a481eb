"""New nested, contiguous set families built for a sharp step scorer (beyond the paper).

All three read a trajectory's step scores as a distribution over where the
decisive error is: ``p_i = s_i / Σ s`` (uniform when every score is 0).
Each gives per-step inclusion thresholds ``h`` with values in [0, 1]; the
set at threshold ``q`` is ``C_q = {i : h[i] <= q}``.

Validity (the same argument for all three). ``h`` is a deterministic
function of the record's scores, never of its label, and ``e in C_q`` iff
``h[e] <= q``. So with calibration score ``r = h[e]`` and ``q_hat`` the
``ceil((n+1)(1-alpha))``-th smallest of n exchangeable calibration scores,
a new trajectory's decisive step is in ``C_q_hat`` with probability at least
1 - alpha (split conformal; ties only add coverage because both sides use
``<=``), and below 1 - alpha + 1/(n+1) when the scores have no ties.
Nested: ``C_q ⊆ C_q'`` for ``q <= q'``. Contiguous: each ``h`` is
quasi-convex along the trajectory (non-increasing, then non-decreasing), so
every sublevel set is one interval; the sketches below say why.

- ``trim`` (density peeling). Start from the whole trajectory. Repeatedly
  cut off the end block (a prefix or a suffix of what is left) with the
  lowest *relative density* ``μ = mean(s over the block) / mean(s over the
  trajectory)`` (the block's mass per step against a uniform spread). On
  ties the longest such prefix and the longest such suffix are both cut
  (their union has the same mean), or everything left when those two
  overlap. Repeat until nothing is left. A step cut at density ``μ`` gets
  ``h = 1/(1 + μ)``. Cut densities never decrease from one cut to the next:
  if a later block had a lower mean than an earlier one, the two together
  would have been a prefix-plus-suffix cut of lower mean than the earlier
  one at its time, and the lowest mean over prefix-plus-suffix cuts is the
  lowest over pure prefixes and suffixes (a mean of two means is at least
  the smaller). So the steps left
  after every cut below density ``λ`` form the interval ``{i : μ_i >= λ}``:
  ``h`` is lowest in the core and rises towards both ends. The set at ``q``
  keeps the core whose peeled-off ends all had density below
  ``1/q - 1``: a sparse stretch between two peaks is cut only once the
  weaker peak is cut with it. This is the nested counterpart of choosing,
  per trajectory, the interval that maximises ``Σ (l p_i - λ)`` (mass
  against a per-step price), whose optima are not nested across λ.
- ``band`` (two-sided band on the scores' CDF). With
  ``F(i) = Σ_{j<i} p_j + p_i / 2`` (non-decreasing in i),
  ``h[i] = 2 |F(i) - 1/2|``: the set at ``q`` is the central stretch whose
  CDF lies within ``q/2`` of the median. ``h`` falls to the median, then rises.
- ``grow`` (interval grown from the most likely step). From the first
  argmax, add one step at a time on the side whose outside mass is larger
  (the left on ties, the only side left at a border); a step gets the mass
  of the interval just after it joined. The masses increase along the chain
  and each chain prefix is an interval, so every ``C_q`` is a chain prefix.

All three need every step's score (NFE = l), or none when ``q_hat = inf``.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

from attribution.conformal._methods import CONFORMAL_METHODS

CONTIGUOUS_METHODS = ("trim", "grow", "band")


def _weights(s: Sequence[float]) -> list[float]:
    """The scores as floats, or all ones when they sum to 0 (a uniform distribution)."""
    w = [float(v) for v in s]
    return w if math.fsum(w) > 0 else [1.0] * len(w)


def step_distribution(s: Sequence[float]) -> np.ndarray:
    """``p_i = s_i / Σ s`` (uniform when the scores sum to 0).

    >>> step_distribution([0.0, 0.5, 0.5]).tolist()
    [0.0, 0.5, 0.5]
    """
    w = _weights(s)
    total = math.fsum(w)
    return np.array([v / total for v in w])


# Every threshold below is one division of sums of the scores (never a sum of
# divided terms), so thresholds that are mathematically equal are bit-equal
# whenever those sums are exact, e.g. for scores on a dyadic grid.


def trim_densities(s: Sequence[float]) -> np.ndarray:
    """Relative density ``μ_i`` of the end block each step is cut with (see the module docstring).

    >>> trim_densities([0.125, 0.5, 0.25, 0.125]).tolist()
    [0.5, 2.0, 1.0, 0.5]
    """
    sums, lens = _trim_blocks(s)
    n, total = len(sums), math.fsum(_weights(s))
    return np.array([sm * n / (ln * total) for sm, ln in zip(sums, lens)])


def _trim_blocks(s: Sequence[float]) -> tuple[list[float], list[int]]:
    """Per step, (sum, length) of the block whose mean is the step's cut density."""
    x = _weights(s)
    n = len(x)
    sums, lens = [0.0] * n, [1] * n
    lo, hi = 0, n - 1
    last = (0.0, 1)
    while lo <= hi:
        seg = x[lo : hi + 1]
        pre, suf = list(itertools.accumulate(seg)), list(itertools.accumulate(seg[::-1]))
        low = min(((v, k) for sums_ in (pre, suf) for k, v in enumerate(sums_, start=1)),
                  key=functools.cmp_to_key(_cmp_mean))
        # the longest prefix and longest suffix with that lowest mean (their union has it too)
        a = max((k for k, v in enumerate(pre, start=1) if v * low[1] == low[0] * k), default=0)
        b = max((k for k, v in enumerate(suf, start=1) if v * low[1] == low[0] * k), default=0)
        if a + b > len(seg):
            a, b = len(seg), 0
        if _cmp_mean(low, last) > 0:  # densities never fall (a guard against float rounding)
            last = low
        for i in [*range(lo, lo + a), *range(hi - b + 1, hi + 1)]:
            sums[i], lens[i] = last
        lo, hi = lo + a, hi - b
    return sums, lens


def _cmp_mean(x: tuple[float, int], y: tuple[float, int]) -> int:
    """Compare the means ``x[0]/x[1]`` and ``y[0]/y[1]`` by cross-multiplying."""
    lhs, rhs = x[0] * y[1], y[0] * x[1]
    return (lhs > rhs) - (lhs < rhs)


def trim_thresholds(s: Sequence[float]) -> np.ndarray:
    """``h = 1 / (1 + μ)``, in (0, 1]: low in the dense core, high at sparse ends.

    >>> trim_thresholds([0.125, 0.5, 0.25, 0.125]).tolist()
    [0.6666666666666666, 0.3333333333333333, 0.5, 0.6666666666666666]
    """
    sums, lens = _trim_blocks(s)
    n, total = len(sums), math.fsum(_weights(s))
    # 1/(1 + sm n/(ln T)) as one division
    return np.array([ln * total / (ln * total + sm * n) for sm, ln in zip(sums, lens)])


def band_thresholds(s: Sequence[float]) -> np.ndarray:
    """``h[i] = 2 |F(i) - 1/2|`` with ``F(i) = Σ_{j<i} p_j + p_i/2``.

    >>> band_thresholds([0.25, 0.25, 0.25, 0.25]).tolist()
    [0.75, 0.25, 0.25, 0.75]
    """
    w = _weights(s)
    total = math.fsum(w)
    below = [0.0, *itertools.accumulate(w)][:-1]
    # 2 |B/T + w/(2T) - 1/2| = |2B + w - T| / T
    return np.array([min(1.0, abs(2.0 * b + wi - total) / total) for b, wi in zip(below, w)])


def grow_order(s: Sequence[float]) -> list[int]:
    """The order in which ``grow`` adds steps.

    >>> grow_order([0.1, 0.3, 0.9, 0.2, 0.05])
    [2, 1, 3, 0, 4]
    """
    w = _weights(s)
    n = len(w)
    lo = hi = first_max(w)
    order = [lo]
    while len(order) < n:
        left, right = math.fsum(w[:lo]), math.fsum(w[hi + 1 :])
        if lo > 0 and (left >= right or hi == n - 1):
            lo -= 1
            order.append(lo)
        else:
            hi += 1
            order.append(hi)
    return order


def first_max(w: Sequence[float]) -> int:
    """Index of the first largest value."""
    return max(range(len(w)), key=lambda i: (w[i], -i))


def grow_thresholds(s: Sequence[float]) -> np.ndarray:
    """``h[i]`` = mass of the grown interval just after step ``i`` joined.

    >>> grow_thresholds([0.25, 0.5, 0.25]).tolist()
    [0.75, 0.5, 1.0]
    """
    w = _weights(s)
    total = math.fsum(w)
    h = np.empty(len(w))
    joined: list[float] = []
    for i in grow_order(s):
        joined.append(w[i])
        h[i] = min(1.0, math.fsum(joined) / total)
    return h


# The threshold rules as registered: the contiguous families use neither the aggregator nor u.
@CONFORMAL_METHODS.register("trim")
def _trim_rule(s: Sequence[float], agg: object, u: float = 1.0) -> np.ndarray:
    return trim_thresholds(s)


@CONFORMAL_METHODS.register("grow")
def _grow_rule(s: Sequence[float], agg: object, u: float = 1.0) -> np.ndarray:
    return grow_thresholds(s)


@CONFORMAL_METHODS.register("band")
def _band_rule(s: Sequence[float], agg: object, u: float = 1.0) -> np.ndarray:
    return band_thresholds(s)
