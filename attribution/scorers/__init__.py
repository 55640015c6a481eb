"""The step-scorer registry: ``SCORERS`` maps a name to a factory of async scorers.

Scorer modules register themselves on import (``@register_scorer``): ``position``, ``learned`` and the LLM
scorers ``llm_naive`` and ``llm_roles`` (:mod:`attribution.scorers.llm`) are built in; installed packages add
theirs through the ``mas_econ.scorers`` entry-point group, other code as a plugin (``--plugin MODULE``).
"""

from __future__ import annotations

from attribution.scorers.base import (
    SCORERS,
    Scorer,
    ScorerContext,
    ScorerFactory,
    StepScores,
    TrajectoryScorer,
    max_normalise,
    per_trajectory,
    register_scorer,
)
from attribution.scorers.crossfit import Fold, cross_fit, plan_folds
# The built-in scorers register themselves when their modules are imported.
from attribution.scorers import learned, llm, position  # noqa: F401


def get_scorer(name: str, **options: object) -> Scorer:
    """Build scorer ``name``; an unknown name is a :class:`~descriptor.errors.UserError` listing the known ones."""
    from descriptor.errors import UserError

    if name not in SCORERS:
        raise UserError(f"unknown scorer {name!r}; known scorers: {', '.join(SCORERS.names())}")
    return SCORERS.get(name)(**options)


__all__ = [
    "SCORERS",
    "Fold",
    "Scorer",
    "ScorerContext",
    "ScorerFactory",
    "StepScores",
    "TrajectoryScorer",
    "cross_fit",
    "get_scorer",
    "max_normalise",
    "per_trajectory",
    "plan_folds",
    "register_scorer",
]
