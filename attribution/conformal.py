"""Conformal prediction sets of trajectory steps that hold the decisive error.

Every algorithm here reduces to *per-step inclusion thresholds* ``h``: for a
trajectory with step scores ``s`` (likelihoods in [0, 1]), step ``i`` is in
the prediction set iff ``h[i] <= q_hat``, and the calibration
(nonconformity) score of a trajectory whose decisive step is ``e`` is
``h[e]``. So the decisive step is in the set exactly when its score is at most
``q_hat``: that equivalence, with ``<=`` on both sides, is what carries the
split-conformal guarantee through ties.

- ``vcp``: ``h[i] = 1 - s_i`` (the set need not be contiguous).
- ``lf``: ``h[i] = g(c_i..c_{l-1})``; ``g`` grows with the segment, so
  ``{i : h[i] <= q_hat}`` is the longest suffix with ``g <= q_hat``.
- ``rf``: ``h[i] = g(c_0..c_i)``: the longest prefix with ``g <= q_hat``.
- ``twf``: ``h[i] = max(lf, rf)``: the intersection of both; when it is empty
  the set falls back to the single most likely step (first argmax).
- ``crsvp``: a nested chain of contiguous sets grown one step at a time
  from the most likely step (first argmax) up a balanced binary tree over
  the steps: at each level the sibling subtree is added, nearest step first
  (``crsvp_order``). ``B_0 = ∅ ⊂ B_1 = {argmax} ⊂ ... ⊂ B_l = whole``. With
  ``u ~ U(0, 1]`` drawn per trajectory, the j-th step added gets the
  interpolated score ``v_j = g(B_{j-1}) + u (g(B_j) - g(B_{j-1}))``
  (monotone in j, so the set is always some ``B_j``); ``h[step] = v_j``.
  The randomisation breaks ties between equal set scores, so coverage is
  close to exactly 1 - alpha rather than above it.
- ``auto``: see ``choose_method`` and ``auto_halves``: the method is chosen on
  one half of the calibration set and q_hat fitted on the other, so the
  choice never sees the data that sets the threshold (exact coverage).

Set scores ``g`` (aggregators) over a segment of a trajectory of length ``l``,
with ``g(∅) = 0`` and ``g(whole) = inf``:
``sum`` = ``(1/l) Σ s_i``; ``max`` = ``max s_i + lam (k - j)/l``;
``lse`` = ``(1/beta) log(1 + (1/l) Σ (exp(beta s_i) - 1))`` (tends to ``sum``
as beta → 0 and to ``max`` as beta → ∞; zero on the empty set).
Sums use ``math.fsum`` so equal segments give bit-equal scores whatever the
summation order.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator, ConfigDict, ValidationError, field_serializer, field_validator

from attribution.scorefile import (
    ScoreRecord,
    ScorerFields,
    common_scorer,
    fingerprint,
    labelled,
    read_score_file,
)
from descriptor.errors import UserError
from descriptor.io import write_json_atomic

BASE_METHODS = ("vcp", "crsvp", "lf", "rf", "twf")
METHODS = (*BASE_METHODS, "auto")
AUTO_CANDIDATES = ("rf", "lf", "twf")  # also the tie-break order
AGGREGATORS = ("sum", "max", "lse")
INF = math.inf


@dataclass(kw_only=True, slots=True, frozen=True)
class Aggregator:
    """Set-score function ``g`` over contiguous segments."""

    kind: str = "sum"
    lam: float = 1.0  # max: weight of the length penalty (k - j)/l
    beta: float = 10.0  # lse: inverse temperature

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATORS:
            raise UserError(f"aggregator: expected one of {', '.join(AGGREGATORS)}, got {self.kind!r}")
        if not (math.isfinite(self.lam) and self.lam >= 0):
            raise UserError(f"lam: expected a finite number >= 0, got {self.lam}")
        if not (math.isfinite(self.beta) and 0 < self.beta <= 500):
            raise UserError(f"beta: expected a number in (0, 500], got {self.beta}")


@dataclass(kw_only=True, slots=True, frozen=True)
class PredictionSet:
    """A conformal set of 0-indexed steps and the scorer evaluations it needed."""

    steps: tuple[int, ...]
    nfe: int  # distinct steps whose score the procedure needed
    fallback: bool = False  # twf: empty intersection replaced by the top-1 step


def _suffix_scores(s: Sequence[float], agg: Aggregator) -> np.ndarray:
    """``g(c_i..c_{l-1})`` for i = 0..l-1; index 0 is the whole trajectory (inf)."""
    n = len(s)
    if agg.kind == "max":
        out = np.maximum.accumulate(np.asarray(s, dtype=float)[::-1])[::-1]
        out = out + agg.lam * (n - 1 - np.arange(n)) / n
    else:
        terms = list(s) if agg.kind == "sum" else [math.expm1(agg.beta * x) for x in s]
        sums = [math.fsum(terms[i:]) for i in range(n)]
        if agg.kind == "sum":
            out = np.array([t / n for t in sums])
        else:
            out = np.array([math.log1p(t / n) / agg.beta for t in sums])
    out[0] = INF
    return out


def suffix_scores(s: Sequence[float], agg: Aggregator) -> np.ndarray:
    """Left-filtration scores: ``out[i] = g(c_i..c_{l-1})``, ``out[0] = inf``.

    >>> suffix_scores([0.2, 0.4, 0.2], Aggregator()).round(3).tolist()
    [inf, 0.2, 0.067]
    """
    return _suffix_scores(s, agg)


def prefix_scores(s: Sequence[float], agg: Aggregator) -> np.ndarray:
    """Right-filtration scores: ``out[i] = g(c_0..c_i)``, ``out[l-1] = inf``."""
    # Every aggregator depends only on the segment's scores, its length and l,
    # so prefixes are suffixes of the reversed trajectory.
    return _suffix_scores(list(s)[::-1], agg)[::-1].copy()


def segment_score(s: Sequence[float], j: int, k: int, agg: Aggregator) -> float:
    """``g(c_j..c_k)`` with the boundary conditions (empty: 0, whole: inf)."""
    n = len(s)
    if k < j:
        return 0.0
    if j == 0 and k == n - 1:
        return INF
    seg = list(s[j : k + 1])
    if agg.kind == "sum":
        return math.fsum(seg) / n
    if agg.kind == "max":
        return max(seg) + agg.lam * (k - j) / n
    return math.log1p(math.fsum(math.expm1(agg.beta * x) for x in seg) / n) / agg.beta


def tree_path(n: int, leaf: int) -> list[tuple[int, int]]:
    """Segments from ``leaf`` up to the root of the balanced binary tree over ``0..n-1``.

    Nodes split ``[lo, hi]`` at ``mid = (lo + hi) // 2`` into ``[lo, mid]`` and ``[mid+1, hi]``.

    >>> tree_path(5, 3)
    [(3, 3), (3, 4), (0, 4)]
    """
    path = [(0, n - 1)]
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if leaf <= mid else (mid + 1, hi)
        path.append((lo, hi))
    return path[::-1]


def crsvp_order(n: int, leaf: int) -> list[int]:
    """Order in which crsvp adds steps: the leaf, then at each level up the tree
    the sibling subtree's steps, nearest first, so every prefix is contiguous.

    >>> crsvp_order(5, 3)
    [3, 4, 2, 1, 0]
    """
    order = [leaf]
    path = tree_path(n, leaf)
    for (lo, hi), (plo, phi) in zip(path, path[1:]):
        order += range(lo - 1, plo - 1, -1) if plo < lo else range(hi + 1, phi + 1)
    return order


def crsvp_levels(s: Sequence[float], agg: Aggregator) -> tuple[list[int], np.ndarray]:
    """crsvp's step order and the scores ``g(B_0..B_l)`` of its nested sets
    ``B_j`` = first j steps of the order (``g(B_0) = 0``, ``g(B_l) = inf``)."""
    order = crsvp_order(len(s), int(np.argmax(s)))
    g = [0.0]
    lo = hi = order[0]
    for i in order:
        lo, hi = min(lo, i), max(hi, i)
        g.append(segment_score(s, lo, hi, agg))
    return order, np.array(g)


def crsvp_thresholds(s: Sequence[float], agg: Aggregator, u: float) -> np.ndarray:
    """``h[order[j-1]] = v_j = g(B_{j-1}) + u (g(B_j) - g(B_{j-1}))``, monotone in j."""
    if not 0.0 < u <= 1.0:
        raise ValueError(f"u must be in (0, 1], got {u}")
    order, g = crsvp_levels(s, agg)
    h = np.empty(len(s))
    for j, i in enumerate(order, start=1):
        h[i] = INF if math.isinf(g[j]) else g[j - 1] + u * (g[j] - g[j - 1])
    return h


def step_thresholds(s: Sequence[float], method: str, agg: Aggregator, u: float = 1.0) -> np.ndarray:
    """Per-step inclusion thresholds ``h`` of ``method`` (see module docstring)."""
    if method == "vcp":
        return 1.0 - np.asarray(s, dtype=float)
    if method == "lf":
        return suffix_scores(s, agg)
    if method == "rf":
        return prefix_scores(s, agg)
    if method == "twf":
        return np.maximum(suffix_scores(s, agg), prefix_scores(s, agg))
    if method == "crsvp":
        return crsvp_thresholds(s, agg, u)
    raise UserError(f"method: expected one of {', '.join(BASE_METHODS)}, got {method!r}")


def nonconformity(s: Sequence[float], mistake_step: int, method: str, agg: Aggregator, u: float = 1.0) -> float:
    """Calibration score: the threshold of the decisive step, i.e. the score of
    the smallest set of the method's family that contains it."""
    return float(step_thresholds(s, method, agg, u)[mistake_step])


def rank_for(n: int, alpha: float) -> int:
    """``ceil((n + 1)(1 - alpha))`` computed exactly from alpha's decimal text.

    Floating point gives ``(9 + 1) * (1 - 0.3) = 7.000000000000001``, whose
    ceiling would be 8; ``Fraction(str(alpha))`` avoids that.
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


def nfe_count(method: str, n: int, q_hat: float, suffix_in: int, prefix_in: int, fallback: bool) -> int:
    """Distinct steps whose score the procedure needs (early stopping for lf/rf/twf).

    ``suffix_in`` = #{i : g(c_i..) <= q_hat}, ``prefix_in`` = #{i : g(..c_i) <= q_hat}.
    lf scans i = l-1, l-2, ... and stops at the first suffix above q_hat; the
    whole trajectory is known to score inf, so step 0 is never needed. rf
    mirrors it. twf runs both scans (union of steps), or needs every step to
    find the top-1 step on fallback. With q_hat = inf every set is the whole
    trajectory and nothing needs scoring; vcp and crsvp otherwise need all steps.
    """
    if math.isinf(q_hat):
        return 0
    if method in ("vcp", "crsvp") or fallback:
        return n
    j_star, k_star = n - suffix_in, prefix_in - 1
    lf_lo = max(j_star - 1, 1)  # lf evaluated steps lf_lo..n-1
    rf_hi = min(k_star + 1, n - 2)  # rf evaluated steps 0..rf_hi
    lf_count, rf_count = max(0, n - lf_lo), max(0, rf_hi + 1)
    if method == "lf":
        return lf_count
    if method == "rf":
        return rf_count
    overlap = max(0, rf_hi - lf_lo + 1)
    return lf_count + rf_count - overlap


def prediction_set(
    s: Sequence[float], method: str, q_hat: float, agg: Aggregator, u: float = 1.0, twf_fallback: bool = True
) -> PredictionSet:
    """The conformal set of one trajectory at threshold ``q_hat``.

    ``twf_fallback=False`` keeps twf's empty intersection empty (the nested
    core of twf, whose coverage is exact; the fallback only adds coverage).

    >>> prediction_set([0.1, 0.6, 0.2, 0.1], "lf", 0.1, Aggregator()).steps
    (2, 3)
    """
    h = step_thresholds(s, method, agg, u)
    steps = tuple(int(i) for i in np.flatnonzero(h <= q_hat))
    fallback = twf_fallback and method == "twf" and not steps
    if fallback:
        steps = (int(np.argmax(s)),)
    suffix_in = prefix_in = 0
    if method in ("lf", "rf", "twf"):
        suffix_in = int(np.sum(suffix_scores(s, agg) <= q_hat))
        prefix_in = int(np.sum(prefix_scores(s, agg) <= q_hat))
    return PredictionSet(steps=steps, nfe=nfe_count(method, len(s), q_hat, suffix_in, prefix_in, fallback), fallback=fallback)


async def lazy_filtration_set(
    n: int, score_at: Callable[[int], Awaitable[float]], method: str, q_hat: float, agg: Aggregator
) -> PredictionSet:
    """``lf``/``rf`` with early stopping: ``score_at(i)`` is awaited only for the steps the scan needs.

    lf scores i = l-1, l-2, ... and stops at the first suffix whose g exceeds
    ``q_hat``; g(whole trajectory) = inf, so step 0 is never scored. rf
    mirrors it from step 0. The set equals :func:`prediction_set`'s on the
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


def record_u(seed: int, record_id: str) -> float:
    """crsvp's interpolation draw in (0, 1], reproducible from (seed, record id)."""
    key = int.from_bytes(hashlib.sha256(record_id.encode()).digest()[:8], "big")
    return 1.0 - float(np.random.default_rng([seed, key]).random())


def removal_rate(set_size: int, n: int) -> float:
    """Share of steps a set rules out: ``1 - |C| / l``."""
    return 1.0 - set_size / n


def choose_method(
    records: Sequence[ScoreRecord], alpha: float, agg: Aggregator, twf_fallback: bool = True
) -> tuple[str, dict[str, float]]:
    """The ``auto`` rule: among rf, lf, twf, the method whose sets, calibrated on
    ``records``, remove the largest mean share of steps on those same records
    (in-sample removal rate at its own q_hat). Ties go to rf, then lf, then twf.

    Returns the chosen method and each candidate's in-sample removal rate.
    """
    rates: dict[str, float] = {}
    for method in AUTO_CANDIDATES:
        hs = [step_thresholds(r.step_scores, method, agg) for r in records]
        q = conformal_quantile([h[r.mistake_step] for h, r in zip(hs, records)], alpha)
        least = 1 if method == "twf" and twf_fallback else 0
        sizes = [max(int(np.sum(h <= q)), least) for h in hs]
        # Rounded so that mathematically equal rates tie whatever the summation order.
        rates[method] = round(float(np.mean([removal_rate(k, r.n_steps) for k, r in zip(sizes, records)])), 12)
    best = max(AUTO_CANDIDATES, key=lambda m: (rates[m], -AUTO_CANDIDATES.index(m)))
    return best, rates


def auto_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """auto's split of n calibration records: (selection indices, threshold indices).

    Choosing the method on the same records that set q_hat picks whichever
    method's q_hat came out low by chance: on synthetic data that cost 2.4
    points of coverage at alpha = 0.1. Disjoint halves keep the guarantee exact.
    With fewer than 2 records there is nothing to select on: rf is used.
    """
    order = np.random.default_rng([seed, 2]).permutation(n)
    return order[: n // 2], order[n // 2 :]


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
    n_selection: int = 0  # auto: labelled trajectories the method was chosen on
    seed: int
    twf_fallback: bool = True  # twf: empty intersection -> top-1 step
    auto_rates: dict[str, float] | None = None


def fit(
    records: Sequence[ScoreRecord], method: str, alpha: float, agg: Aggregator, seed: int = 0,
    twf_fallback: bool = True,
) -> Fitted:
    """Calibrate ``method`` on the labelled records (null ``mistake_step`` skipped)."""
    if method not in METHODS:
        raise UserError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    rank_for(1, alpha)  # validates alpha
    usable, skipped = labelled(list(records))
    if not usable:
        raise UserError("no record has a mistake_step: nothing to calibrate on")
    resolved, rates, n_sel = method, None, 0
    if method == "auto":
        sel, rest = auto_halves(len(usable), seed)
        resolved, n_sel = AUTO_CANDIDATES[0], len(sel)
        if n_sel:
            resolved, rates = choose_method([usable[i] for i in sel], alpha, agg, twf_fallback)
        usable = [usable[i] for i in rest]
    scores = [
        nonconformity(r.step_scores, r.mistake_step, resolved, agg, record_u(seed, r.id)) for r in usable
    ]
    return Fitted(
        method=method, resolved_method=resolved, agg=agg, alpha=alpha,
        q_hat=conformal_quantile(scores, alpha), n=len(usable), n_skipped=skipped, n_selection=n_sel,
        seed=seed, twf_fallback=twf_fallback, auto_rates=rates,
    )


def predict(fitted: Fitted, record: ScoreRecord) -> PredictionSet:
    """The calibrated set for one trajectory (its ``mistake_step`` is not used)."""
    u = record_u(fitted.seed, record.id)
    return prediction_set(
        record.step_scores, fitted.resolved_method, fitted.q_hat, fitted.agg, u, fitted.twf_fallback
    )


# --- calibration files --------------------------------------------------------


def _q_from_json(v: object) -> object:
    return INF if v == "inf" else v


class Calibration(ScorerFields):
    """``calibration.json``: a fitted conformal threshold and how it was made.

    ∞ is written as the string ``"inf"`` (strict JSON has no Infinity). The
    scorer fields say which scorer produced the calibration scores: new runs
    must be scored by it for the guarantee to hold (null in older files).
    """

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """File format version."""
    method: str
    """Requested method (vcp, crsvp, lf, rf, twf or auto)."""
    resolved_method: str
    """Base method actually used (differs from ``method`` only for auto)."""
    aggregator: str
    """Set-score aggregator: sum, max or lse."""
    lam: float
    """max aggregator: weight of the length penalty."""
    beta: float
    """lse aggregator: inverse temperature."""
    alpha: float
    """Miscoverage level; target coverage is 1 - alpha."""
    q_hat: Annotated[float, BeforeValidator(_q_from_json)]
    """Threshold; "inf" in the file means every set is the whole trajectory."""
    n: int
    """Labelled calibration trajectories that set q_hat."""
    n_selection: int = 0
    """auto only: labelled trajectories (disjoint from those n) the method was chosen on."""
    n_skipped: int
    """Records skipped because their mistake_step was null."""
    seed: int
    """Seed of crsvp's per-trajectory interpolation draws."""
    twf_fallback: bool = True
    """twf: replace an empty intersection by the top-1 step."""
    fingerprint: str
    """sha256 of the calibration score file's bytes."""
    scores_path: str
    """Score file the threshold was fitted on."""
    auto_rates: dict[str, float] | None = None
    """auto only: in-sample removal rate of each candidate."""

    @field_validator("q_hat")
    @classmethod
    def _q_not_nan(cls, v: float) -> float:
        if math.isnan(v) or v == -INF:
            raise ValueError('expected a number or "inf"')
        return v

    @field_serializer("q_hat")
    def _q_to_json(self, v: float) -> float | str:
        return "inf" if math.isinf(v) else v

    def fitted(self) -> Fitted:
        """The in-memory form ``predict`` takes."""
        return Fitted(
            method=self.method, resolved_method=self.resolved_method,
            agg=Aggregator(kind=self.aggregator, lam=self.lam, beta=self.beta),
            alpha=self.alpha, q_hat=self.q_hat, n=self.n, n_skipped=self.n_skipped, n_selection=self.n_selection,
            seed=self.seed, twf_fallback=self.twf_fallback, auto_rates=self.auto_rates,
        )


def calibrate_file(
    scores_path: str | Path, method: str, alpha: float, agg: Aggregator, seed: int, out: str | Path,
    twf_fallback: bool = True,
) -> Calibration:
    """Fit on a score file and write ``out`` (calibration.json) atomically, with the file's scorer."""
    records = read_score_file(scores_path)
    info = common_scorer(records, str(scores_path))
    f = fit(records, method, alpha, agg, seed, twf_fallback)
    cal = Calibration(
        method=f.method, resolved_method=f.resolved_method, aggregator=agg.kind, lam=agg.lam,
        beta=agg.beta, alpha=alpha, q_hat=f.q_hat, n=f.n, n_skipped=f.n_skipped, n_selection=f.n_selection,
        seed=seed,
        twf_fallback=twf_fallback,
        fingerprint=fingerprint(scores_path), scores_path=str(scores_path), auto_rates=f.auto_rates,
        **info.model_dump(),
    )
    write_json_atomic(out, cal.model_dump(mode="json"))
    return cal


def load_calibration(path: str | Path) -> Calibration:
    """Read calibration.json; bad content raises ``UserError`` naming the field."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: calibration file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: not a readable JSON calibration file ({err})") from None
    try:
        cal = Calibration.model_validate(obj)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "file"
        raise UserError(f"{path}: field '{loc}': {first['msg']}") from None
    if cal.method not in METHODS or cal.resolved_method not in BASE_METHODS:
        raise UserError(f"{path}: field 'method': expected one of {', '.join(METHODS)}, got {cal.method!r}")
    cal.fitted()  # validates the aggregator fields
    return cal


def predict_file(calibration_path: str | Path, scores_path: str | Path) -> list[dict]:
    """Per-record sets for a score file, as JSON-ready rows.

    ``covered`` is true/false when the record has a mistake_step, else null.
    """
    cal = load_calibration(calibration_path)
    fitted = cal.fitted()
    rows = []
    for rec in read_score_file(scores_path):
        ps = predict(fitted, rec)
        rows.append({
            "id": rec.id, "n_steps": rec.n_steps, "set": list(ps.steps), "set_size": len(ps.steps),
            "restart_step": min(ps.steps) if ps.steps else None, "nfe": ps.nfe,
            "fallback": ps.fallback, "method": fitted.resolved_method,
            "q_hat": "inf" if math.isinf(fitted.q_hat) else fitted.q_hat,
            "covered": None if rec.mistake_step is None else rec.mistake_step in ps.steps,
        })
    return rows
