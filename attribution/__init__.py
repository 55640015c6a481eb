"""Failure attribution: who failed and when, with step scorers and evaluation.

Public surface (implementation in the submodules)::

    from attribution import load_who_and_when_dir, METHODS, SCORERS, attribution_metrics
"""

from attribution.evaluate import (
    CaseRecord,
    agent_correct,
    attribute_all,
    attribution_metrics,
    removal_at_coverage,
    scorer_metrics,
    step_within,
)
from attribution.jobs import AttributeJob, ScoreJob, run_attribute_job, run_score_job
from attribution.loaders import (
    LoadResult,
    MalformedFile,
    SkippedFile,
    load_run,
    load_runs_dir,
    load_trajectories,
    load_who_and_when_dir,
    load_who_and_when_file,
)
from attribution.methods import METHODS, Method, MethodContext, Prediction, get_method, register_method
from attribution.scorers import SCORERS, Scorer, ScorerContext, StepScores, get_scorer, register_scorer
from attribution.trajectory import Step, Trajectory, normalize_agent

__all__ = [
    "METHODS",
    "SCORERS",
    "AttributeJob",
    "CaseRecord",
    "LoadResult",
    "MalformedFile",
    "Method",
    "MethodContext",
    "Prediction",
    "ScoreJob",
    "Scorer",
    "ScorerContext",
    "SkippedFile",
    "Step",
    "StepScores",
    "Trajectory",
    "agent_correct",
    "attribute_all",
    "attribution_metrics",
    "get_method",
    "get_scorer",
    "load_run",
    "load_runs_dir",
    "load_trajectories",
    "load_who_and_when_dir",
    "load_who_and_when_file",
    "normalize_agent",
    "register_method",
    "register_scorer",
    "removal_at_coverage",
    "run_attribute_job",
    "run_score_job",
    "scorer_metrics",
    "step_within",
]
