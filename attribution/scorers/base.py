"""The step-scorer contract: a likelihood in [0, 1] for every step of a trajectory.

A scorer is an async callable ``(trajectories, ctx) -> list[StepScores]``
(one result per trajectory, same order) built by a factory registered by
name in :data:`SCORERS`. Scorers that look at one trajectory at a time wrap
an async ``(trajectory, ctx) -> StepScores`` with :func:`per_trajectory`;
trained scorers (``position``, ``learned``) see the whole batch because they
cross-fit (see :mod:`attribution.scorers.crossfit`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from attribution.sources.trajectory import Trajectory
from descriptor.registry import Registry


class ScorerContext(BaseModel):
    """Everything a scorer may use besides the trajectories to score."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    model: Any = None
    """A LangChain ``BaseChatModel`` for LLM scorers, or None."""
    route: str | None = None
    context_window: int = Field(default=8192, ge=256)
    """Tokens the route's model accepts (tokens)."""
    max_output_tokens: int = Field(default=512, ge=1)
    count_tokens: Any = None
    """``async (text) -> tokens`` by the served model's tokenizer (embedded route); None: chars / 4."""
    with_ground_truth: bool = True
    seed: int = 0
    folds: int = Field(default=5, ge=2)
    """Cross-fitting folds for trained scorers."""
    train: list[Trajectory] = Field(default_factory=list)
    """Extra labelled trajectories to train on (``--train-dir``); never scored."""
    concurrency: int = Field(default=4, ge=1)
    """Trajectories scored at once by per-trajectory scorers."""


class StepScores(BaseModel):
    """Scores of one trajectory's steps."""

    id: str
    n_steps: int = Field(ge=0)
    step_scores: list[float]
    """One likelihood per step, each in [0, 1]; higher means more likely the decisive error."""
    nfe: int = Field(default=0, ge=0)
    """Model calls spent on this trajectory (function evaluations)."""
    tokens: int = Field(default=0, ge=0)
    """Prompt plus completion tokens spent on this trajectory (tokens)."""
    seconds: float = Field(default=0.0, ge=0.0)
    details: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> StepScores:
        if len(self.step_scores) != self.n_steps:
            raise ValueError(f"{self.id}: {len(self.step_scores)} scores for {self.n_steps} steps")
        bad = [s for s in self.step_scores if not 0.0 <= s <= 1.0]
        if bad:
            raise ValueError(f"{self.id}: scores must lie in [0, 1], got {bad[:3]}")
        return self


Scorer = Callable[[list[Trajectory], ScorerContext], Awaitable[list[StepScores]]]
ScorerFactory = Callable[..., Scorer]
TrajectoryScorer = Callable[[Trajectory, ScorerContext], Awaitable[StepScores]]

SCORERS: Registry[ScorerFactory] = Registry("scorer", "mas_econ.scorers")
"""Scorer name -> factory; factories take keyword options and return a :data:`Scorer`. Filled by the scorer
modules (:func:`register_scorer`), installed packages (entry-point group ``mas_econ.scorers``) and plugins."""


def register_scorer(name: str) -> Callable[[ScorerFactory], ScorerFactory]:
    """Decorator adding a factory to :data:`SCORERS` under ``name`` (a name taken twice is an error)."""
    return SCORERS.register(name)


def per_trajectory(fn: TrajectoryScorer) -> Scorer:
    """A batch scorer running ``fn`` on each trajectory, ``ctx.concurrency`` at a time.

    Fills ``seconds`` with the measured wall time when ``fn`` leaves it 0.
    """

    async def run(trajectories: list[Trajectory], ctx: ScorerContext) -> list[StepScores]:
        gate = asyncio.Semaphore(ctx.concurrency)

        async def one(t: Trajectory) -> StepScores:
            async with gate:
                start = time.perf_counter()
                res = await fn(t, ctx)
                if not res.seconds:
                    res = res.model_copy(update={"seconds": time.perf_counter() - start})
                return res

        return list(await asyncio.gather(*(one(t) for t in trajectories)))

    return run


def max_normalise(values: list[float]) -> list[float]:
    """Scale non-negative values so the largest is 1 (all zeros stay zeros)."""
    top = max(values, default=0.0)
    if top <= 0:
        return [0.0 for _ in values]
    return [min(1.0, max(0.0, v / top)) for v in values]
