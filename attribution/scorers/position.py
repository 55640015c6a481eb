"""``position``: an error-position prior fitted on labelled failures.

Each labelled error at step ``k`` of ``n`` becomes the normalised position
``u = (k + 0.5) / n`` in (0, 1). A Gaussian kernel density with reflection
at 0 and 1 (Silverman bandwidth, at least ``min_bandwidth``) is mixed with a
little uniform mass (``uniform_weight``) so no step gets zero. A step's
probability is the density's mass over its bin ``[k/n, (k+1)/n]``; the
probabilities of a trajectory sum to 1, and the reported scores are them
divided by the largest (the most likely step scores 1).

A prior is fitted per subset when the training data hold at least
``min_per_subset`` records of the target's subset, else on all records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from attribution.scorers.base import ScorerContext, StepScores, max_normalise, register_scorer
from attribution.scorers.crossfit import cross_fit
from attribution.sources.trajectory import Trajectory


@dataclass(kw_only=True, slots=True, frozen=True)
class PositionDensity:
    """A reflected Gaussian KDE on [0, 1] mixed with a uniform."""

    centres: np.ndarray
    bandwidth: float
    uniform_weight: float

    def mass(self, lo: float, hi: float) -> float:
        """Probability of a normalised position in ``[lo, hi]`` (0 <= lo <= hi <= 1)."""
        if self.centres.size == 0:
            return hi - lo
        c, h = self.centres, self.bandwidth
        total = 0.0
        for centre in (c, -c, 2.0 - c):  # reflections keep the mass inside [0, 1]
            total += float(np.sum(norm.cdf((hi - centre) / h) - norm.cdf((lo - centre) / h)))
        kde = total / c.size
        return (1.0 - self.uniform_weight) * kde + self.uniform_weight * (hi - lo)

    def step_probs(self, n_steps: int) -> list[float]:
        """Probability of each of ``n_steps`` equal bins; sums to 1."""
        edges = np.linspace(0.0, 1.0, n_steps + 1)
        raw = np.array([self.mass(edges[i], edges[i + 1]) for i in range(n_steps)])
        return [float(x) for x in raw / raw.sum()]


def normalised_positions(trajectories: list[Trajectory]) -> np.ndarray:
    """``(k + 0.5) / n`` of each labelled error."""
    return np.array([(t.mistake_step + 0.5) / t.n_steps for t in trajectories if t.mistake_step is not None])


def fit_density(trajectories: list[Trajectory], *, min_bandwidth: float = 0.04,
                uniform_weight: float = 0.05) -> PositionDensity:
    """Fit the prior on the labelled trajectories (none: uniform)."""
    u = normalised_positions(trajectories)
    if u.size < 2:
        return PositionDensity(centres=u, bandwidth=1.0, uniform_weight=1.0 if u.size == 0 else uniform_weight)
    iqr = float(np.subtract(*np.percentile(u, [75, 25])))
    spread = min(float(np.std(u, ddof=1)), iqr / 1.349) if iqr > 0 else float(np.std(u, ddof=1))
    h = max(min_bandwidth, 0.9 * spread * u.size ** (-0.2))
    return PositionDensity(centres=u, bandwidth=h, uniform_weight=uniform_weight)


@dataclass(kw_only=True, slots=True, frozen=True)
class PositionPrior:
    """One density per subset seen often enough in training, and a pooled fallback."""

    pooled: PositionDensity
    by_subset: dict[str, PositionDensity]

    def density_for(self, t: Trajectory) -> PositionDensity:
        return self.by_subset.get(t.subset, self.pooled)

    def step_probs(self, t: Trajectory) -> list[float]:
        return self.density_for(t).step_probs(t.n_steps)


def fit_position_prior(trajectories: list[Trajectory], *, min_per_subset: int = 15) -> PositionPrior:
    """Fit the pooled prior and one per subset with at least ``min_per_subset`` labelled records."""
    labelled = [t for t in trajectories if t.mistake_step is not None]
    subsets = sorted({t.subset for t in labelled})
    by_subset = {}
    for s in subsets:
        part = [t for t in labelled if t.subset == s]
        if len(part) >= min_per_subset:
            by_subset[s] = fit_density(part)
    return PositionPrior(pooled=fit_density(labelled), by_subset=by_subset)


@register_scorer("position")
def position_scorer(min_per_subset: int = 15) -> object:
    """Cross-fitted error-position prior; no model calls (nfe 0)."""

    async def run(trajectories: list[Trajectory], ctx: ScorerContext) -> list[StepScores]:
        probs: dict[str, list[float]] = {}

        def score(prior: PositionPrior, t: Trajectory) -> list[float]:
            probs[t.id] = prior.step_probs(t)
            return max_normalise(probs[t.id])

        results = cross_fit(trajectories, ctx.train, folds=ctx.folds, seed=ctx.seed,
                            fit=lambda tr: fit_position_prior(tr, min_per_subset=min_per_subset), score=score)
        return [r.model_copy(update={"details": {**r.details, "raw_scores": probs[r.id]}}) for r in results]

    return run
