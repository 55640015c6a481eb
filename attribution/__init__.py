"""Failure attribution: who failed and when, with step scorers and evaluation.

Public surface (implementation in the submodules)::

    from attribution import load_who_and_when_dir, METHODS, SCORERS, attribution_metrics
"""

from descriptor.exports import lazy_exports
from descriptor.ownership import check_packages

check_packages()  # another distribution's top-level package of the same name: a clear ImportError

_EXPORTS = {
    "AttributeJob": "attribution.jobs",
    "CaseRecord": "attribution.evaluate",
    "LoadResult": "attribution.sources.loaders",
    "METHODS": "attribution.methods",
    "MalformedFile": "attribution.sources.loaders",
    "Method": "attribution.methods",
    "MethodContext": "attribution.methods",
    "Prediction": "attribution.methods",
    "SCORERS": "attribution.scorers",
    "ScoreJob": "attribution.jobs",
    "Scorer": "attribution.scorers",
    "ScorerContext": "attribution.scorers",
    "SkippedFile": "attribution.sources.loaders",
    "SweepRollbackOptions": "attribution.rollback.sweep",
    "Step": "attribution.sources.trajectory",
    "StepScores": "attribution.scorers",
    "Trajectory": "attribution.sources.trajectory",
    "agent_correct": "attribution.evaluate",
    "attribute_all": "attribution.evaluate",
    "attribution_metrics": "attribution.evaluate",
    "get_method": "attribution.methods",
    "get_scorer": "attribution.scorers",
    "load_run": "attribution.sources.loaders",
    "load_runs_dir": "attribution.sources.loaders",
    "load_trajectories": "attribution.sources.loaders",
    "load_who_and_when_dir": "attribution.sources.loaders",
    "load_who_and_when_file": "attribution.sources.loaders",
    "normalize_agent": "attribution.sources.trajectory",
    "register_method": "attribution.methods",
    "register_scorer": "attribution.scorers",
    "removal_at_coverage": "attribution.evaluate",
    "rollback_sweep": "attribution.rollback.sweep",
    "run_attribute_job": "attribution.jobs",
    "run_score_job": "attribution.jobs",
    "scorer_metrics": "attribution.evaluate",
    "step_within": "attribution.evaluate",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
