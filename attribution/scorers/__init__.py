"""The step-scorer registry: ``SCORERS`` maps a name to a factory of async scorers.

``position`` and ``learned`` are built in. Modules written separately (the
LLM scorers ``llm_naive`` and ``llm_roles``) are imported here when present;
a missing module is skipped, any other import error is real and raised.
"""

from __future__ import annotations

import importlib

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
from attribution.scorers import learned, position  # noqa: F401  (register "learned", "position")

OPTIONAL_MODULES: tuple[str, ...] = (
    "attribution.scorers.llm",
    "attribution.scorers.llm_naive",
    "attribution.scorers.llm_roles",
)


def _import_optional() -> None:
    for name in OPTIONAL_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise


_import_optional()


def get_scorer(name: str, **options: object) -> Scorer:
    """Build scorer ``name``; an unknown name is a :class:`~descriptor.errors.UserError` listing the known ones."""
    from descriptor.errors import UserError

    if name not in SCORERS:
        raise UserError(f"unknown scorer {name!r}; known scorers: {', '.join(sorted(SCORERS))}")
    return SCORERS[name](**options)


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
