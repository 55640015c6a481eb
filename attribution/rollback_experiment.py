"""Rollback over every failed run of a sweep, per strategy, with confidence intervals."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attribution.conformal import Calibration
from attribution.loaders import load_runs_dir
from attribution.rollback import STRATEGIES, RollbackRecord, rollback_one
from attribution.scorefile import ScoreRecord
from attribution.trajectory import Trajectory
from mas.config import ExperimentConfig
from mas.errors import UserError
from mas.io import write_json_atomic


async def score_runs(trajs: list[Trajectory], scorer: str, *, train: list[Trajectory] | None = None,
                     cfg: ExperimentConfig | None = None, route: str | None = None, seed: int = 0) -> list[ScoreRecord]:
    """Step scores of ``trajs`` with the named scorer (trained scorers fit on ``train``)."""
    from attribution.scorers import SCORERS
    from attribution.scorers.base import ScorerContext

    if scorer not in SCORERS:
        raise UserError(f"unknown scorer {scorer!r}; known: {', '.join(sorted(SCORERS))}")
    model, window = None, 8192
    if route is not None and cfg is not None:
        from mas.models import make_chat_model

        bound = make_chat_model(cfg, route)
        model, window = bound.model, bound.route.context_window
    ctx = ScorerContext(model=model, route=route, context_window=window, seed=seed, train=train or [])
    results = await SCORERS[scorer]()(trajs, ctx)
    return [ScoreRecord(id=t.id, n_steps=r.n_steps, step_scores=r.step_scores, mistake_step=t.mistake_step,
                        mistake_agent=t.mistake_agent, nfe=r.nfe) for t, r in zip(trajs, results, strict=True)]


def wilson_ci(successes: int, n: int, z: float = 1.96) -> tuple[float | None, float | None]:
    """Wilson score interval of a proportion (95 % by default); None when n = 0."""
    if n == 0:
        return None, None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_ci(values: Sequence[float], seed: int = 0, n_boot: int = 2000) -> tuple[float | None, float | None]:
    """Percentile bootstrap 95 % interval of the mean; None when empty."""
    if not values:
        return None, None
    x = np.asarray(values, dtype=float)
    means = np.random.default_rng(seed).choice(x, size=(n_boot, x.size), replace=True).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def aggregate(records: Sequence[RollbackRecord]) -> dict[str, Any]:
    """Success rate, coverage and cost of one strategy's rollbacks, with 95 % intervals."""
    n = len(records)
    wins = sum(r.success for r in records)
    known = [r.covered for r in records if r.covered is not None]
    costs = [r.cost for r in records]
    return {
        "n": n,
        "success_rate": wins / n if n else None, "success_rate_ci": wilson_ci(wins, n),
        "coverage": sum(known) / len(known) if known else None,
        "coverage_ci": wilson_ci(sum(known), len(known)), "coverage_n": len(known),
        "cost": float(np.mean(costs)) if costs else None, "cost_ci": bootstrap_ci(costs),
        "tokens_mean": float(np.mean([r.tokens for r in records])) if records else None,
        "steps_redone_mean": float(np.mean([r.steps_redone for r in records])) if records else None,
        "set_size_mean": float(np.mean([len(r.set) for r in records])) if records else None,
    }


async def rollback_experiment(experiment_root: str | Path, *, calibration: Calibration | None,
                              strategies: Sequence[str], scorer: str, train_dir: str | Path | None = None,
                              out: str | Path, concurrency: int = 4, seed: int = 0) -> dict[str, Any]:
    """Roll back every failed run under ``experiment_root`` with each strategy; write ``rollback_results.json``."""
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad:
        raise UserError(f"unknown strategy {', '.join(bad)}; expected some of {', '.join(STRATEGIES)}")
    failed = load_runs_dir(experiment_root).trajectories
    if not failed:
        raise UserError(f"{experiment_root}: no failed run to roll back")
    train = load_runs_dir(train_dir).trajectories if train_dir else []
    needs_scores = any(s != "restart" for s in strategies)
    scores = await score_runs(failed, scorer, train=train, seed=seed) if needs_scores else [None] * len(failed)
    gate = asyncio.Semaphore(concurrency)

    async def one(t: Trajectory, sc: ScoreRecord | None, strategy: str) -> RollbackRecord:
        async with gate:
            return await rollback_one(t, strategy=strategy, scores=sc, calibration=calibration,
                                      scoring_nfe=(sc.nfe or 0) if sc else 0)

    results: dict[str, Any] = {}
    for strategy in strategies:
        recs = await asyncio.gather(*(one(t, sc, strategy) for t, sc in zip(failed, scores, strict=True)))
        results[strategy] = {**aggregate(recs), "runs": [r.model_dump(mode="json") for r in recs]}
    summary = {
        "experiment_root": str(experiment_root), "scorer": scorer,
        "calibration": None if calibration is None else {
            "method": calibration.method, "alpha": calibration.alpha, "fingerprint": calibration.fingerprint},
        **results,
    }
    write_json_atomic(Path(out) / "rollback_results.json", summary)
    return summary
