"""Thresholds, sets, the split-conformal quantile, ``auto``, and fitting/predicting one score file.

``auto`` chooses among the contiguous methods (:data:`AUTO_CANDIDATES`) from
the calibration records alone, without giving up exact coverage:

0. Fewer than ``AUTO_MIN_RECORDS`` (100) labelled calibration records:
   ``trim`` on all of them (a choice made from n alone, so coverage is
   exact). Measured on the Who&When records outside the dev split (issue
   29): with about 30 calibration records, choosing on half of them and
   fitting q_hat on the other half gave RR 0.371 at alpha = 0.2 against
   trim's 0.442 on all of them: q_hat from half the records is coarser
   (rank ``ceil((m+1)(1-alpha))`` of m), and an inner cross-validation on
   15 records picks by noise. trim is the family that led on every scorer
   measured (``attribution/README.md``), so it is the fallback.
1. The n calibration records are split once, seeded (``auto_halves``):
   ``n // 2`` *selection* records, the other ``n - n // 2`` set q_hat.
2. On the selection records, inner cross-validation: ``AUTO_INNER_SPLITS`` =
   20 random inner splits (seeded by ``seed`` and their number), ``m // 3``
   inner-test records and the rest inner-calibration. For each candidate
   and inner split: q_hat on the inner-calibration records, then the
   inner-test records' coverage and removal rate (out of sample, never the
   in-sample removal rate).
3. Eligible: mean inner coverage >= 1 - alpha - 2 sqrt(alpha (1 - alpha) / m)
   (a guard against a candidate that covers badly; every candidate is split
   conformal, so in expectation none does). The chosen method has the
   largest mean inner removal rate among the eligible ones (ties: the order
   of :data:`AUTO_CANDIDATES`); if none is eligible, the best-covering one.
   Fewer than 3 selection records: the first candidate, ``trim``.
4. q_hat of the chosen method on the other records only.

Coverage is exact: the choice is a function of the selection records, which
are independent of the records that set q_hat and of the test record, so
given the choice the usual split-conformal argument applies
(1 - alpha <= coverage < 1 - alpha + 1/(n - n//2 + 1) without ties).

Why not choose and fit q_hat on the same records (inner cross-validation on
all n, then q_hat on all n)? It was measured, on cross-fitted learned and
position scores of the Who&When dev-train part: when two candidates are
close (rf and trim with the position prior), the choice follows the same
noise that sets q_hat, and coverage at alpha = 0.2 fell to 0.790 (86
records) and 0.767 (37 records) over random splits; halves kept 0.833 and
0.804. Picking the best of K methods on shared data loses up to order
sqrt(log K / n) of coverage (Yang & Kuchibhotla, "Selection and aggregation
of conformal prediction sets", JASA 2024). The price of halves is a q_hat
from half the records; with the learned scorer, whose trim sets are far
ahead, it cost 0.04 of removal rate at 37 records.

``crsvp`` is not a candidate: its sets are coarse tree nodes and it draws a
random u per trajectory, which the other (deterministic) families do not need.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from attribution.conformal._aggregators import INF, Aggregator, prefix_scores, suffix_scores
from attribution.conformal._contiguous import CONTIGUOUS_METHODS
from attribution.conformal._methods import CONFORMAL_METHODS, base_methods, method_names
from attribution.conformal._paper import PAPER_METHODS, PredictionSet, filtration_nfe, first_argmax
from attribution.sources.scorefile import ScoreRecord, labelled
from descriptor.errors import UserError

BASE_METHODS = (*PAPER_METHODS, *CONTIGUOUS_METHODS)
"""The built-in methods (:func:`base_methods` adds installed and plugin ones)."""
METHODS = (*BASE_METHODS, "auto")
"""The built-in methods and ``auto`` (:func:`method_names` adds installed and plugin ones)."""
AUTO_CANDIDATES = ("trim", "grow", "band", "rf", "lf", "twf")  # also the tie-break order
AUTO_INNER_SPLITS = 20
AUTO_MIN_RECORDS = 100
"""Below this many labelled calibration records ``auto`` is ``trim`` fitted on all of them."""


def step_thresholds(s: Sequence[float], method: str, agg: Aggregator, u: float = 1.0) -> np.ndarray:
    """Per-step inclusion thresholds ``h`` of ``method``: step i is in the set iff ``h[i] <= q_hat``."""
    if method not in CONFORMAL_METHODS:
        raise UserError(f"method: expected one of {', '.join(base_methods())}, got {method!r}")
    return CONFORMAL_METHODS.get(method)(s, agg, u)


def nonconformity(s: Sequence[float], mistake_step: int, method: str, agg: Aggregator, u: float = 1.0) -> float:
    """Calibration score: the threshold of the decisive step, i.e. the score of
    the smallest set of the method's family that contains it."""
    return float(step_thresholds(s, method, agg, u)[mistake_step])


def rank_for(n: int, alpha: float) -> int:
    """``ceil((n + 1)(1 - alpha))`` computed exactly from alpha's decimal text.

    Floating point gives ``(9 + 1) * (1 - 0.3) = 7.000000000000001``, whose
    ceiling would be 8; ``Fraction(str(alpha))`` avoids that.

    >>> rank_for(9, 0.3)
    7
    """
    if not 0.0 < alpha < 1.0:
        raise UserError(f"alpha: expected a number in (0, 1), got {alpha}")
    return math.ceil((n + 1) * (1 - Fraction(str(float(alpha)))))


def conformal_quantile(scores: Iterable[float], alpha: float) -> float:
    """q_hat: the ``ceil((n+1)(1-alpha))``-th smallest score, inf when that rank exceeds n.

    >>> conformal_quantile([0.3, 0.1, 0.2, 0.4], 0.5)
    0.3
    """
    ordered = sorted(float(x) for x in scores)
    k = rank_for(len(ordered), alpha)
    return INF if k > len(ordered) else ordered[k - 1]


def prediction_set(
    s: Sequence[float], method: str, q_hat: float, agg: Aggregator, u: float = 1.0, twf_fallback: bool = False
) -> PredictionSet:
    """The conformal set of one trajectory at threshold ``q_hat``.

    ``twf_fallback=True`` (beyond the paper) replaces twf's empty
    intersection by the top-1 step; the paper leaves it empty.

    >>> prediction_set([0.1, 0.6, 0.2, 0.1], "lf", 0.1, Aggregator()).steps
    (2, 3)
    >>> prediction_set([0.1, 0.6, 0.2, 0.1], "trim", 0.6, Aggregator()).steps
    (1, 2)
    """
    n = len(s)
    h = step_thresholds(s, method, agg, u)
    steps = tuple(int(i) for i in np.flatnonzero(h <= q_hat))
    fallback = twf_fallback and method == "twf" and not steps
    if fallback:
        steps = (first_argmax(s),)
    if math.isinf(q_hat):
        nfe = 0
    elif method in ("lf", "rf", "twf") and not fallback:
        suffix_in = int(np.sum(suffix_scores(s, agg) <= q_hat))
        prefix_in = int(np.sum(prefix_scores(s, agg) <= q_hat))
        nfe = filtration_nfe(method, n, suffix_in, prefix_in)
    else:
        nfe = n
    return PredictionSet(steps=steps, nfe=nfe, fallback=fallback)


def record_u(seed: int, record_id: str) -> float:
    """crsvp's interpolation draw in (0, 1], reproducible from (seed, record id)."""
    key = int.from_bytes(hashlib.sha256(record_id.encode()).digest()[:8], "big")
    return 1.0 - float(np.random.default_rng([seed, key]).random())


def removal_rate(set_size: int, n: int) -> float:
    """Share of steps a set rules out: ``1 - |C| / l``."""
    return 1.0 - set_size / n


def auto_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """auto's split of n calibration records: (selection indices, threshold indices).

    No selection record below :data:`AUTO_MIN_RECORDS` (then auto is trim on all n).
    """
    order = np.random.default_rng([seed, 2]).permutation(n)
    k = n // 2 if n >= AUTO_MIN_RECORDS else 0
    return order[:k], order[k:]


def inner_splits(n: int, seed: int) -> np.ndarray:
    """auto's inner splits of n calibration records: ``(AUTO_INNER_SPLITS, n)`` permutations
    whose first ``n // 3`` columns are inner-test positions, the rest inner-calibration."""
    rng = np.random.default_rng([seed, 3, n])
    return np.stack([rng.permutation(n) for _ in range(AUTO_INNER_SPLITS)])


def coverage_guard(alpha: float, n: int) -> float:
    """Least mean inner coverage for an auto candidate to be eligible."""
    return 1.0 - alpha - 2.0 * math.sqrt(alpha * (1.0 - alpha) / n)


def pick(rates: dict[str, float], coverage: dict[str, float], alpha: float, n: int) -> str:
    """auto's rule on inner-CV figures (see the module docstring)."""
    floor = coverage_guard(alpha, n)
    eligible = [m for m in AUTO_CANDIDATES if coverage[m] >= floor]
    if not eligible:
        return max(AUTO_CANDIDATES, key=lambda m: (coverage[m], -AUTO_CANDIDATES.index(m)))
    return max(eligible, key=lambda m: (rates[m], -AUTO_CANDIDATES.index(m)))


def choose_method(
    records: Sequence[ScoreRecord], alpha: float, agg: Aggregator, seed: int = 0
) -> tuple[str, dict[str, float], dict[str, float]]:
    """The ``auto`` choice by inner cross-validation on labelled *selection* ``records``
    (in the order given; see the module docstring).

    Returns the chosen method and each candidate's mean inner-CV removal rate
    and coverage (empty dicts when there are fewer than 3 records).
    """
    n = len(records)
    if n < 3:
        return AUTO_CANDIDATES[0], {}, {}
    splits = inner_splits(n, seed)
    n_test = n // 3
    lengths = np.array([r.n_steps for r in records])
    rates: dict[str, float] = {}
    coverage: dict[str, float] = {}
    for method in AUTO_CANDIDATES:
        hs = [step_thresholds(r.step_scores, method, agg) for r in records]
        scores = np.array([h[r.mistake_step] for h, r in zip(hs, records)])
        rr, ec = [], []
        for perm in splits:
            test, cal = perm[:n_test], perm[n_test:]
            q = conformal_quantile(scores[cal], alpha)
            sizes = np.array([int(np.sum(hs[t] <= q)) for t in test])
            rr.append(float(np.mean(1.0 - sizes / lengths[test])))
            ec.append(float(np.mean(scores[test] <= q)))
        # Rounded so that mathematically equal figures tie whatever the summation order.
        rates[method], coverage[method] = round(float(np.mean(rr)), 12), round(float(np.mean(ec)), 12)
    return pick(rates, coverage, alpha, n), rates, coverage


@dataclass(kw_only=True, slots=True, frozen=True)
class Fitted:
    """Result of calibration: what ``predict`` needs."""

    method: str  # as requested (may be "auto")
    resolved_method: str  # the base method actually used
    agg: Aggregator
    alpha: float
    q_hat: float  # may be inf
    n: int  # labelled trajectories that set q_hat
    n_skipped: int  # records skipped for a null mistake_step
    n_selection: int = 0  # auto: labelled trajectories the method was chosen on (disjoint from those n)
    seed: int
    twf_fallback: bool = False  # twf: empty intersection -> top-1 step (beyond the paper)
    auto_rates: dict[str, float] | None = None  # auto: mean inner-CV removal rate per candidate
    auto_coverage: dict[str, float] | None = None  # auto: mean inner-CV coverage per candidate


def fit(
    records: Sequence[ScoreRecord], method: str, alpha: float, agg: Aggregator, seed: int = 0,
    twf_fallback: bool = False,
) -> Fitted:
    """Calibrate ``method`` on the labelled records (null ``mistake_step`` skipped)."""
    if method not in method_names():
        raise UserError(f"method: expected one of {', '.join(method_names())}, got {method!r}")
    rank_for(1, alpha)  # validates alpha
    usable, skipped = labelled(list(records))
    if not usable:
        raise UserError("no record has a mistake_step: nothing to calibrate on")
    resolved, rates, cover, n_sel = method, None, None, 0
    if method == "auto":
        sel, rest = auto_halves(len(usable), seed)
        resolved, rates, cover = choose_method([usable[i] for i in sel], alpha, agg, seed)
        n_sel, rates, cover = len(sel), rates or None, cover or None
        usable = [usable[i] for i in rest]
    scores = [nonconformity(r.step_scores, r.mistake_step, resolved, agg, record_u(seed, r.id)) for r in usable]
    return Fitted(
        method=method, resolved_method=resolved, agg=agg, alpha=alpha,
        q_hat=conformal_quantile(scores, alpha), n=len(usable), n_skipped=skipped, n_selection=n_sel,
        seed=seed, twf_fallback=twf_fallback, auto_rates=rates, auto_coverage=cover,
    )


def predict(fitted: Fitted, record: ScoreRecord) -> PredictionSet:
    """The calibrated set for one trajectory (its ``mistake_step`` is not used)."""
    u = record_u(fitted.seed, record.id)
    return prediction_set(
        record.step_scores, fitted.resolved_method, fitted.q_hat, fitted.agg, u, fitted.twf_fallback
    )
