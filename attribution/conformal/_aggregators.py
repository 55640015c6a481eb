"""Set scores ``g`` over contiguous segments of a trajectory's step scores.

For a trajectory of length ``l`` with step scores ``s`` (likelihoods in
[0, 1]) and a segment ``c_j..c_k`` of ``m = k - j + 1`` steps, with the
boundary conditions ``g(∅) = 0`` and ``g(whole trajectory) = inf``:

- ``sum``: ``(1/l) Σ s_i`` (the paper's default).
- ``max``: ``max s_i + lam (k - j)/l``, a maximum with a length penalty. The
  paper sweeps ``lam`` over 0.01–0.1; the default 0.05 is the middle of that
  range and the default of the authors' released configuration
  (``conf/conformal_method.yaml``, ``default_lambda: 0.05``).
- ``lse``: the paper's *normalised LogSumExp* as its Eq. 19 prints it
  (appendix C.2.1), with the trajectory length ``l`` and ``- log l`` outside
  the ``1/beta``: ``(1/beta) log Σ exp(beta l s_i) - log l`` over the
  segment's steps. Adding a step adds a positive term, so ``g`` grows with
  the segment; a single low-scoring step may score below ``g(∅) = 0``
  (``-log l`` for a score of 0).
- ``lse_inside``: the same with ``- log l`` inside the ``1/beta``,
  ``(1/beta) (log Σ exp(beta l s_i) - log l)``: the placement of the
  released code (below) with the paper's ``l``. Equal to ``lse`` at
  beta = 1; otherwise it differs from it by ``(1 - 1/beta) log l``, a
  constant of the trajectory, so a trajectory's sets are ranked alike and
  only the calibration across lengths changes. Kept so that the two
  differences between the printed formula and the released code (where
  ``log`` stands, which length) can be measured one at a time; it is what
  ``lse`` computed before it followed the print.
- ``lse_segment``: ``lse_inside`` with the segment's own length ``m`` in
  place of ``l``, as the authors' released code defines it
  (``src/aggregator/normalized_logsumexp_aggregator.py``, ``g_lse_normalized``;
  github.com/layer6ai-labs/conformal-agent-error-attribution). As beta → 0 it
  tends to the segment's plain sum ``Σ s_i``, as beta → ∞ to ``m · max s_i``.

All three use beta = 1.0 by default, the released configuration's ``default_beta``, at which ``lse`` and
``lse_inside`` coincide. The default aggregator is ``sum``, the paper's main text's; of the LogSumExp family the
name ``lse`` is the formula as printed, because a method named for the paper follows its text.

Every ``g`` is non-decreasing when a step is added at either end, which is
what makes left and right filtrations nested (for ``lse`` and ``lse_inside``
a step adds a positive term under a logarithm whose shift depends on ``l``
alone). For ``lse_segment`` with scores in
[0, 1]: with ``a_i = exp(beta m s_i) >= 1`` and ``A`` their mean, adding a
step gives the mean of ``a_i^((m+1)/m)`` and ``exp(beta (m+1) s_new) >= 1``,
which is at least ``(m A^((m+1)/m) + 1)/(m + 1) >= A`` (power mean, then
weighted AM-GM).

Sums use ``math.fsum`` so equal segments give bit-equal scores whatever the
summation order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from descriptor.errors import UserError

AGGREGATORS = ("sum", "max", "lse", "lse_inside", "lse_segment")
DEFAULT_LAM = 0.05
DEFAULT_BETA = 1.0
INF = math.inf


@dataclass(kw_only=True, slots=True, frozen=True)
class Aggregator:
    """Set-score function ``g`` over contiguous segments.

    >>> Aggregator().kind, Aggregator().lam, Aggregator().beta
    ('sum', 0.05, 1.0)
    """

    kind: str = "sum"
    lam: float = DEFAULT_LAM  # max: weight of the length penalty (k - j)/l
    beta: float = DEFAULT_BETA  # lse: inverse temperature

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATORS:
            raise UserError(f"aggregator: expected one of {', '.join(AGGREGATORS)}, got {self.kind!r}")
        if not (math.isfinite(self.lam) and self.lam >= 0):
            raise UserError(f"lam: expected a finite number >= 0, got {self.lam}")
        if not (math.isfinite(self.beta) and 0 < self.beta <= 500):
            raise UserError(f"beta: expected a number in (0, 500], got {self.beta}")


def lse_normalised(seg: Sequence[float], beta: float, length: int | None = None, *, log_inside: bool = True) -> float:
    """The normalised LogSumExp over a non-empty segment, overflow-safe: ``(1/beta) (log Σ exp(beta L x) - log L)``
    with ``log_inside`` (the released code's placement), else ``(1/beta) log Σ exp(beta L x) - log L`` (the paper's
    Eq. 19 as printed); ``L`` is ``length`` (the paper: the trajectory's length), else the segment's own length
    (the released code).

    >>> round(lse_normalised([0.5, 0.5], 1.0), 6)  # equal scores, L = m: m * x
    1.0
    >>> round(lse_normalised([0.5, 0.5], 1.0, length=4), 6)  # L = 4: 2 + log(2/4)
    1.306853
    >>> round(lse_normalised([0.5, 0.5], 0.5, length=4, log_inside=False), 6)  # 2 + 2 log 2 - log 4
    2.0
    """
    m = len(seg) if length is None else length
    xs = [beta * m * x for x in seg]
    top = max(xs)
    lse = top + math.log(math.fsum(math.exp(x - top) for x in xs))
    return (lse - math.log(m)) / beta if log_inside else lse / beta - math.log(m)


def _open_segment_score(seg: Sequence[float], j: int, k: int, n: int, agg: Aggregator) -> float:
    """``g`` of a segment that is neither empty nor the whole trajectory."""
    if agg.kind == "sum":
        return math.fsum(seg) / n
    if agg.kind == "max":
        return max(seg) + agg.lam * (k - j) / n
    if agg.kind == "lse":
        return lse_normalised(seg, agg.beta, length=n, log_inside=False)
    return lse_normalised(seg, agg.beta, length=n if agg.kind == "lse_inside" else None)


def segment_score(s: Sequence[float], j: int, k: int, agg: Aggregator) -> float:
    """``g(c_j..c_k)`` with the boundary conditions (empty: 0, whole: inf).

    >>> segment_score([0.25, 0.5, 0.25], 1, 2, Aggregator())
    0.25
    """
    n = len(s)
    if k < j:
        return 0.0
    if j == 0 and k == n - 1:
        return INF
    return _open_segment_score(list(s[j : k + 1]), j, k, n, agg)


def suffix_scores(s: Sequence[float], agg: Aggregator) -> np.ndarray:
    """Left-filtration scores: ``out[i] = g(c_i..c_{l-1})``, ``out[0] = inf``.

    >>> suffix_scores([0.2, 0.4, 0.2], Aggregator()).round(3).tolist()
    [inf, 0.2, 0.067]
    """
    n = len(s)
    out = np.array([INF] + [_open_segment_score(list(s[i:]), i, n - 1, n, agg) for i in range(1, n)])
    return out[:n]


def prefix_scores(s: Sequence[float], agg: Aggregator) -> np.ndarray:
    """Right-filtration scores: ``out[i] = g(c_0..c_i)``, ``out[l-1] = inf``.

    >>> prefix_scores([0.2, 0.4, 0.2], Aggregator()).round(3).tolist()
    [0.067, 0.2, inf]
    """
    n = len(s)
    return np.array([_open_segment_score(list(s[: i + 1]), 0, i, n, agg) for i in range(n - 1)] + [INF])
