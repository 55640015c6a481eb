"""The paper's set families (Feng et al., "Conformal Agent Error Attribution", arXiv 2605.06788).

Each reduces to per-step inclusion thresholds ``h``: step ``i`` is in the set
iff ``h[i] <= q_hat``, and a trajectory's calibration score is ``h[e]`` for
its decisive step ``e`` (see the package docstring for why that carries the
guarantee).

- ``vcp``: ``h[i] = 1 - s_i`` (the set need not be contiguous).
- ``lf``: ``h[i] = g(c_i..c_{l-1})``; ``g`` grows with the segment, so
  ``{i : h[i] <= q_hat}`` is the longest suffix with ``g <= q_hat``.
- ``rf``: ``h[i] = g(c_0..c_i)``: the longest prefix with ``g <= q_hat``.
- ``twf``: ``h[i] = max(lf, rf)``: the intersection of both, which may be
  empty, as in the paper. *Beyond the paper* (named option
  ``twf_fallback``, off by default): an empty intersection is replaced by
  the single most likely step (first argmax); that only adds coverage.
- ``crsvp``: hierarchical conformal prediction over a binary tree whose
  leaves are the steps, as the paper states it. The candidate sets are the
  nodes on the path from the most likely leaf (first argmax) to the root:
  ``B_0 = ∅ ⊂ B_1 = {argmax} ⊂ B_2 = parent ⊂ ... ⊂ B_L = whole``. The tree
  halves each node top-down: ``[lo, hi]`` has the children ``[lo, mid]`` and
  ``[mid + 1, hi]``, ``mid = (lo + hi) // 2`` (the middle step of an odd
  node goes to the first child). With ``u ~ U(0, 1]`` drawn per trajectory,
  the top-1 leaf keeps its own score ``v_1 = g(B_1)`` (no interpolation), and
  every step first reached at ``B_j`` (j >= 2) gets
  ``v_j = g(B_{j-1}) + u (g(B_j) - g(B_{j-1}))`` (monotone in j, so the set
  is always a tree node ``B_j``). The paper's threshold is the
  ``⌊(n+1)α⌋``-th largest calibration score, which is the
  ``⌈(n+1)(1-α)⌉``-th smallest (:func:`paper_rank` says why), so the shared
  quantile serves.
- ``crsvp_released``: the authors' released code (``tree_crsvp_conformal.py``
  of github.com/layer6ai-labs/conformal-agent-error-attribution): adjacent
  nodes are paired bottom-up, an odd last node carried up alone (the nodes
  of level ``t`` are the aligned blocks ``[k 2^t, min((k+1) 2^t, l) - 1]``;
  a carried node equals its child and is skipped), and the top-1 leaf's
  score is interpolated too: ``v_1 = u g(B_1)``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from attribution.conformal._aggregators import INF, Aggregator, prefix_scores, segment_score, suffix_scores
from attribution.conformal._methods import CONFORMAL_METHODS
from descriptor.errors import UserError

PAPER_METHODS = ("vcp", "crsvp", "lf", "rf", "twf")
"""The paper's methods (``crsvp_released`` is its released code's variant of crsvp)."""


@dataclass(kw_only=True, slots=True, frozen=True)
class PredictionSet:
    """A conformal set of 0-indexed steps and the scorer evaluations it needed."""

    steps: tuple[int, ...]
    nfe: int  # distinct steps whose score the procedure needed
    fallback: bool = False  # twf with twf_fallback: empty intersection replaced by the top-1 step


def first_argmax(s: Sequence[float]) -> int:
    """Index of the first largest score."""
    return int(np.argmax(np.asarray(s, dtype=float)))


CRSVP_VARIANTS = {"crsvp": "paper", "crsvp_released": "released"}
"""The two crsvp methods and whose definition each follows."""


def paper_rank(n: int, alpha: float) -> int:
    """The paper's ``⌊(n+1)α⌋``-th largest of ``n`` scores as a rank from the smallest: ``n + 1 - ⌊(n+1)α⌋``.

    That equals ``⌈(n+1)(1-α)⌉`` (``n + 1 - ⌊x⌋ = ⌈n + 1 - x⌉``), the shared
    quantile's rank; a rank above ``n`` (``⌊(n+1)α⌋ = 0``) means q_hat = inf.

    >>> paper_rank(9, 0.1), paper_rank(19, 0.1), paper_rank(5, 0.1)
    (9, 18, 6)
    """
    return n + 1 - math.floor((n + 1) * alpha + 1e-12)


def halving_path(n: int, leaf: int) -> list[tuple[int, int]]:
    """Tree nodes from ``leaf`` up to the root when each node ``[lo, hi]`` is halved top-down at
    ``mid = (lo + hi) // 2`` (the paper's tree).

    >>> halving_path(5, 3)
    [(3, 3), (3, 4), (0, 4)]
    >>> halving_path(4, 1)
    [(1, 1), (0, 1), (0, 3)]
    """
    if not 0 <= leaf < n:
        raise ValueError(f"leaf {leaf} outside 0..{n - 1}")
    lo, hi = 0, n - 1
    path = [(lo, hi)]
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if leaf <= mid else (mid + 1, hi)
        path.append((lo, hi))
    return path[::-1]


def tree_path(n: int, leaf: int) -> list[tuple[int, int]]:
    """Distinct tree nodes from ``leaf`` up to the root over steps ``0..n-1``, paired bottom-up (the released
    code's tree).

    Level ``t`` holds the aligned blocks ``[k 2^t, min((k+1) 2^t, n) - 1]``
    (bottom-up pairing of adjacent nodes, an odd last node carried up alone).

    >>> tree_path(5, 3)
    [(3, 3), (2, 3), (0, 3), (0, 4)]
    >>> tree_path(4, 1)
    [(1, 1), (0, 1), (0, 3)]
    """
    if not 0 <= leaf < n:
        raise ValueError(f"leaf {leaf} outside 0..{n - 1}")
    path = [(leaf, leaf)]
    width = 1
    while path[-1] != (0, n - 1):
        width *= 2
        lo = (leaf // width) * width
        node = (lo, min(lo + width, n) - 1)
        if node != path[-1]:
            path.append(node)
    return path


def crsvp_levels(
    s: Sequence[float], agg: Aggregator, variant: str = "paper"
) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """crsvp's chain ``B_1..B_L`` (tree nodes, leaf first) and, per node, the ends ``(lower, upper)`` its score
    ``v_j = lower_j + u (upper_j - lower_j)`` interpolates between: ``upper_j = g(B_j)``, ``lower_j = g(B_{j-1})``
    (``g(B_0) = g(∅) = 0``, ``g(B_L) = g(whole) = inf``), except the paper's top-1 leaf, whose ``lower`` is its
    own ``g`` (no interpolation). ``variant``: ``paper`` or ``released`` (see the module docstring)."""
    if variant not in ("paper", "released"):
        raise ValueError(f"crsvp variant: expected paper or released, got {variant!r}")
    leaf = first_argmax(s)
    path = halving_path(len(s), leaf) if variant == "paper" else tree_path(len(s), leaf)
    g = np.array([0.0] + [segment_score(s, lo, hi, agg) for lo, hi in path])
    lower, upper = g[:-1].copy(), g[1:]
    if variant == "paper":
        lower[0] = upper[0]
    return path, lower, upper


def crsvp_thresholds(s: Sequence[float], agg: Aggregator, u: float, variant: str = "paper") -> np.ndarray:
    """``h[i] = v_j`` for the first chain node ``B_j`` holding step ``i``."""
    if not 0.0 < u <= 1.0:
        raise ValueError(f"u must be in (0, 1], got {u}")
    path, lower, upper = crsvp_levels(s, agg, variant)
    h = np.empty(len(s))
    prev = (path[0][0], path[0][0] - 1)  # the empty set
    for j, (lo, hi) in enumerate(path):
        v = INF if math.isinf(upper[j]) else lower[j] + u * (upper[j] - lower[j])
        h[lo : prev[0]] = v
        h[prev[1] + 1 : hi + 1] = v
        prev = (lo, hi)
    return h


@CONFORMAL_METHODS.register("vcp")
def vcp_thresholds(s: Sequence[float], agg: Aggregator, u: float = 1.0) -> np.ndarray:
    """``h[i] = 1 - s_i``."""
    return 1.0 - np.asarray(s, dtype=float)


@CONFORMAL_METHODS.register("lf")
def lf_thresholds(s: Sequence[float], agg: Aggregator, u: float = 1.0) -> np.ndarray:
    """``h[i] = g(c_i..c_{l-1})``."""
    return suffix_scores(s, agg)


@CONFORMAL_METHODS.register("rf")
def rf_thresholds(s: Sequence[float], agg: Aggregator, u: float = 1.0) -> np.ndarray:
    """``h[i] = g(c_0..c_i)``."""
    return prefix_scores(s, agg)


@CONFORMAL_METHODS.register("twf")
def twf_thresholds(s: Sequence[float], agg: Aggregator, u: float = 1.0) -> np.ndarray:
    """``h[i] = max(lf, rf)``."""
    return np.maximum(suffix_scores(s, agg), prefix_scores(s, agg))


CONFORMAL_METHODS.register("crsvp", crsvp_thresholds)


@CONFORMAL_METHODS.register("crsvp_released")
def crsvp_released_thresholds(s: Sequence[float], agg: Aggregator, u: float = 1.0) -> np.ndarray:
    """crsvp as the authors' released code builds it (bottom-up tree, the top-1 leaf interpolated)."""
    return crsvp_thresholds(s, agg, u, variant="released")


def filtration_nfe(method: str, n: int, suffix_in: int, prefix_in: int) -> int:
    """Distinct steps an early-stopped lf/rf/twf scan scores at a finite ``q_hat``.

    ``suffix_in`` = #{i : g(c_i..) <= q_hat}, ``prefix_in`` = #{i : g(..c_i) <= q_hat}.
    lf scans i = l-1, l-2, ... and stops at the first suffix above q_hat; the
    whole trajectory is known to score inf, so step 0 is never needed. rf
    mirrors it; twf runs both scans (union of steps).
    """
    j_star, k_star = n - suffix_in, prefix_in - 1
    lf_lo = max(j_star - 1, 1)  # lf evaluated steps lf_lo..n-1
    rf_hi = min(k_star + 1, n - 2)  # rf evaluated steps 0..rf_hi
    lf_count, rf_count = max(0, n - lf_lo), max(0, rf_hi + 1)
    if method == "lf":
        return lf_count
    if method == "rf":
        return rf_count
    return lf_count + rf_count - max(0, rf_hi - lf_lo + 1)


async def lazy_filtration_set(
    n: int, score_at: Callable[[int], Awaitable[float]], method: str, q_hat: float, agg: Aggregator
) -> PredictionSet:
    """``lf``/``rf`` with early stopping: ``score_at(i)`` is awaited only for the steps the scan needs.

    lf scores i = l-1, l-2, ... and stops at the first suffix whose g exceeds
    ``q_hat``; g(whole trajectory) = inf, so step 0 is never scored. rf
    mirrors it from step 0. The set equals ``prediction_set``'s on the
    full scores, and ``nfe`` (the steps scored) equals its count: the scan
    is what makes that count true for a scorer that pays per step (an LLM).
    """
    if method not in ("lf", "rf"):
        raise UserError(f"early stopping applies to lf and rf, not {method!r}")
    if math.isinf(q_hat):
        return PredictionSet(steps=tuple(range(n)), nfe=0)
    s = [0.0] * n  # unscored steps are never read: each g below covers scored steps only
    order = range(n - 1, 0, -1) if method == "lf" else range(0, n - 1)
    kept: list[int] = []
    scored = 0
    for i in order:
        s[i] = float(await score_at(i))
        scored += 1
        g = segment_score(s, i, n - 1, agg) if method == "lf" else segment_score(s, 0, i, agg)
        if g > q_hat:
            break
        kept.append(i)
    return PredictionSet(steps=tuple(sorted(kept)), nfe=scored)
