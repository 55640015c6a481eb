"""Run methods and scorers over trajectories, and score them against the labels.

- :func:`attribute_all` runs one method on every trajectory (bounded
  concurrency, wall time measured per case) into :class:`CaseRecord` rows;
  :func:`attribution_metrics` gives agent- and step-level accuracy, step
  accuracy within ±1…±5, mean tokens and wall time, overall and per subset.
- :func:`scorer_metrics` gives a step scorer's top-1 accuracy and AUROC
  (step level; positives are the labelled mistake steps), overall and per
  subset.

Agents compare by :func:`~attribution.sources.trajectory.normalize_agent`; steps
compare as integers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from sklearn.metrics import roc_auc_score

from attribution.methods.base import Method, MethodContext, Prediction
from attribution.scorers.base import StepScores
from attribution.sources.trajectory import Trajectory, normalize_agent
from descriptor.errors import UserError
from descriptor.stats import wilson_interval
from mas.logging import get_logger

log = get_logger(__name__)

TOLERANCES: tuple[int, ...] = (1, 2, 3, 4, 5)


class CaseRecord(BaseModel):
    """One line of ``predictions.jsonl``: a method's answer next to the label."""

    id: str
    subset: str
    predicted_agent: str | None
    predicted_step: int | None
    confidence: float
    tokens: int
    """Tokens the method spent on this case (tokens)."""
    seconds: float
    """Wall time of this case (s)."""
    nfe: int
    truncated: bool | str
    gold_agent: str | None
    gold_step: int | None
    n_steps: int
    error: str | None = None
    """Why the method failed on this case (then the prediction is empty), else None."""
    details: dict[str, Any] = Field(default_factory=dict)


def agent_correct(predicted: str | None, gold: str | None) -> bool:
    """Same agent up to case and a trailing " (…)".

    >>> agent_correct("websurfer", "WebSurfer (-> Orchestrator)")
    True
    """
    return bool(predicted) and bool(gold) and normalize_agent(predicted) == normalize_agent(gold)


def step_within(predicted: int | None, gold: int | None, tolerance: int) -> bool:
    """``|predicted - gold| <= tolerance`` as integers; a missing prediction is wrong."""
    return predicted is not None and gold is not None and abs(int(predicted) - int(gold)) <= tolerance


def _record(t: Trajectory, pred: Prediction | None, seconds: float, error: str | None) -> CaseRecord:
    pred = pred or Prediction()
    return CaseRecord(
        id=t.id, subset=t.subset, predicted_agent=pred.agent, predicted_step=pred.step, confidence=pred.confidence,
        tokens=pred.tokens, seconds=pred.seconds or seconds, nfe=pred.nfe, truncated=pred.truncated,
        gold_agent=t.mistake_agent, gold_step=t.mistake_step, n_steps=t.n_steps, error=error, details=pred.details,
    )


async def attribute_all(method: Method, trajectories: Sequence[Trajectory], ctx: MethodContext,
                        *, concurrency: int = 4, progress: Any = None) -> list[CaseRecord]:
    """Run ``method`` on every trajectory, ``concurrency`` at a time; results in input order.

    A case whose method raises is recorded with ``error`` and an empty
    prediction (counted wrong); a :class:`UserError` (e.g. no model given)
    stops the whole run. ``progress`` (optional) is called once per finished case.
    """
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(t: Trajectory) -> CaseRecord:
        async with gate:
            start = time.perf_counter()
            try:
                pred, error = await method(t, ctx), None
            except UserError:
                raise
            except Exception as err:  # one bad case must not lose a long run
                log.warning("method failed on a case", case=t.id, error=f"{type(err).__name__}: {err}")
                pred, error = None, f"{type(err).__name__}: {err}"
            rec = _record(t, pred, time.perf_counter() - start, error)
            if progress is not None:
                progress(rec)
            return rec

    return list(await asyncio.gather(*(one(t) for t in trajectories)))


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _attribution_block(records: list[CaseRecord]) -> dict[str, Any]:
    labelled_agent = [r for r in records if r.gold_agent]
    labelled_step = [r for r in records if r.gold_step is not None]
    agent_right = sum(agent_correct(r.predicted_agent, r.gold_agent) for r in labelled_agent)
    step_right = sum(step_within(r.predicted_step, r.gold_step, 0) for r in labelled_step)
    block: dict[str, Any] = {
        "n": len(records),
        "n_labelled": len(labelled_step),
        "n_agent_labelled": len(labelled_agent),
        "agent_accuracy": agent_right / len(labelled_agent) if labelled_agent else None,
        "agent_accuracy_ci": list(wilson_interval(agent_right, len(labelled_agent))) if labelled_agent else None,
        "step_accuracy": step_right / len(labelled_step) if labelled_step else None,
        "step_accuracy_ci": list(wilson_interval(step_right, len(labelled_step))) if labelled_step else None,
        "step_accuracy_within": {
            str(k): _mean([float(step_within(r.predicted_step, r.gold_step, k)) for r in labelled_step])
            for k in TOLERANCES
        },
        "mean_tokens": _mean([float(r.tokens) for r in records]),
        "mean_nfe": _mean([float(r.nfe) for r in records]),
        "mean_seconds": _mean([r.seconds for r in records]),
        "total_seconds": float(sum(r.seconds for r in records)),
        "n_truncated": sum(1 for r in records if r.truncated),
        "n_errors": sum(1 for r in records if r.error),
        "n_no_step": sum(1 for r in records if r.predicted_step is None),
        # a method that chose to predict nothing (step-by-step finding no error): counted wrong in both accuracies
        "n_no_prediction": sum(1 for r in records if r.error is None and r.predicted_agent is None
                               and r.predicted_step is None),
    }
    return block


def attribution_metrics(records: Sequence[CaseRecord]) -> dict[str, dict[str, Any]]:
    """``{"all": {...}, "<subset>": {...}}``: accuracies with their Wilson 95 % intervals (each labelled case one
    trial), tokens per case, wall time (s)."""
    recs = list(records)
    out = {"all": _attribution_block(recs)}
    for subset in sorted({r.subset for r in recs}):
        out[subset] = _attribution_block([r for r in recs if r.subset == subset])
    return out


def _top1(scores: np.ndarray, gold: int) -> float:
    """1 if the gold step is the unique maximum, 1/k when it ties with k-1 others, else 0."""
    best = np.flatnonzero(scores == scores.max())
    return float(gold in best) / len(best)


def _within_auroc(scores: np.ndarray, gold: int) -> float | None:
    """Fraction of other steps scored below the gold step (ties count half)."""
    others = np.delete(scores, gold)
    if others.size == 0:
        return None
    return float(((others < scores[gold]).sum() + 0.5 * (others == scores[gold]).sum()) / others.size)


def removal_at_coverage(pairs: list[tuple[np.ndarray, int]], coverage: float = 0.8) -> float | None:
    """Mean fraction of steps below the threshold that keeps ``coverage`` of the gold steps.

    A diagnostic with the threshold chosen on the same records (in-sample),
    not a conformal guarantee; the conformal commands do that properly.
    """
    if not pairs:
        return None
    threshold = float(np.quantile([s[g] for s, g in pairs], 1.0 - coverage, method="lower"))
    return float(np.mean([(s < threshold).mean() for s, _ in pairs]))


def _scorer_block(pairs: list[tuple[np.ndarray, int]], results: list[StepScores]) -> dict[str, Any]:
    y = np.concatenate([np.eye(len(s))[g] for s, g in pairs]) if pairs else np.array([])
    pooled = np.concatenate([s for s, _ in pairs]) if pairs else np.array([])
    within = [w for s, g in pairs if (w := _within_auroc(s, g)) is not None]
    return {
        "n": len(results),
        "n_labelled": len(pairs),
        "mean_steps": _mean([float(r.n_steps) for r in results]),
        "top1_accuracy": _mean([_top1(s, g) for s, g in pairs]),
        "auroc": float(roc_auc_score(y, pooled)) if 0 < y.sum() < y.size else None,
        "auroc_within": _mean(within),
        "removal_at_80_in_sample": removal_at_coverage(pairs, 0.8),
        "mean_nfe": _mean([float(r.nfe) for r in results]),
        "mean_tokens": _mean([float(r.tokens) for r in results]),
    }


def scorer_metrics(results: Sequence[StepScores], trajectories: Sequence[Trajectory]) -> dict[str, dict[str, Any]]:
    """Top-1 accuracy, pooled step-level AUROC and per-trajectory AUROC, overall and per subset.

    ``auroc`` pools every step of every labelled trajectory (positives: the
    mistake steps), so it also rewards scores comparable across
    trajectories; ``auroc_within`` averages the per-trajectory rank of the
    mistake step.
    """
    by_id = {t.id: t for t in trajectories}
    rows = [(r, by_id[r.id]) for r in results]
    out = {}
    for subset in ["all", *sorted({t.subset for _, t in rows})]:
        part = [(r, t) for r, t in rows if subset == "all" or t.subset == subset]
        pairs = [(np.asarray(r.step_scores, float), t.mistake_step) for r, t in part if t.mistake_step is not None]
        out[subset] = _scorer_block(pairs, [r for r, _ in part])
    return out
