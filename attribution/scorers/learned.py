"""``learned``: a CPU classifier of "this step is the decisive error", cross-fitted.

Features come from :func:`attribution.scorers.features.step_features`
(position, speaker, lexical error cues, neighbouring tool failures). Every
step of every labelled training trajectory is one example (positive: the
labelled mistake step). The default model is an extra-trees forest (300
trees, leaves of at least 3 examples), which beat logistic regression,
gradient boosting, a conditional logit and TF-IDF/SVD text features in
cross-fitted comparisons on the Who&When dev split (see
``attribution/README.md``).

Scores: the classifier's probability per step (``raw_scores`` in
``details``), divided by the trajectory's largest so the most likely step
scores 1 (``normalise="max"``, the default) or left as is
(``normalise="none"``). Targets are always scored by models that never saw
them (:func:`attribution.scorers.crossfit.cross_fit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from attribution.scorers.base import ScorerContext, StepScores, max_normalise, register_scorer
from attribution.scorers.crossfit import cross_fit
from attribution.scorers.features import step_features
from attribution.sources.trajectory import Trajectory

ModelKind = Literal["extra_trees", "logreg"]


def make_classifier(kind: ModelKind, seed: int) -> Any:
    """A fresh unfitted scikit-learn classifier of the given kind."""
    if kind == "extra_trees":
        return ExtraTreesClassifier(n_estimators=300, min_samples_leaf=3, random_state=seed, n_jobs=1)
    if kind == "logreg":
        return make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))
    raise ValueError(f"unknown learned model {kind!r}; expected extra_trees or logreg")


@dataclass(kw_only=True, slots=True)
class StepClassifier:
    """A fitted classifier plus the feature names it was trained with."""

    model: Any
    feature_names: list[str]
    n_train: int

    def probabilities(self, t: Trajectory) -> list[float]:
        """P(step is the decisive error) for each step of ``t``."""
        X, names = step_features(t)
        if names != self.feature_names:
            raise ValueError("feature names changed between fit and score")
        return [float(p) for p in self.model.predict_proba(X)[:, 1]]


def fit_step_classifier(trajectories: list[Trajectory], *, kind: ModelKind = "extra_trees",
                        seed: int = 0) -> StepClassifier:
    """Fit on every step of the labelled trajectories (positive: the mistake step)."""
    labelled = [t for t in trajectories if t.mistake_step is not None and t.n_steps > 0]
    if not labelled:
        raise ValueError("no labelled trajectory to fit the learned scorer on")
    xs, ys, names = [], [], []
    for t in labelled:
        X, names = step_features(t)
        xs.append(X)
        y = np.zeros(t.n_steps)
        y[t.mistake_step] = 1.0
        ys.append(y)
    model = make_classifier(kind, seed)
    model.fit(np.vstack(xs), np.concatenate(ys))
    return StepClassifier(model=model, feature_names=names, n_train=len(labelled))


def _score(clf: StepClassifier, t: Trajectory, normalise: str) -> tuple[list[float], list[float]]:
    raw = clf.probabilities(t)
    return (max_normalise(raw) if normalise == "max" else raw), raw


@register_scorer("learned")
def learned_scorer(model: ModelKind = "extra_trees", normalise: Literal["max", "none"] = "max") -> object:
    """Cross-fitted step classifier; no model calls (nfe 0)."""

    async def run(trajectories: list[Trajectory], ctx: ScorerContext) -> list[StepScores]:
        raw_by_id: dict[str, list[float]] = {}

        def score(clf: StepClassifier, t: Trajectory) -> list[float]:
            scores, raw_by_id[t.id] = _score(clf, t, normalise)
            return scores

        results = cross_fit(trajectories, ctx.train, folds=ctx.folds, seed=ctx.seed,
                            fit=lambda tr: fit_step_classifier(tr, kind=model, seed=ctx.seed), score=score)
        return [r.model_copy(update={"details": {**r.details, "model": model, "raw_scores": raw_by_id[r.id]}})
                for r in results]

    return run
