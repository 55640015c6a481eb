"""Where the scripted model injects its one wrong step into a run (ground truth for attribution and rollback).

Two ways to say where:

- ``inject.step`` (or nothing): the old rule. The error goes at that step, or
  at a seeded one of the first four steps, whatever the run's length.
- ``inject.position`` (``--inject-position``): the error's *relative* place in
  the run, for rollback scenarios like the conformal-attribution paper's
  left-, mid- and right-dense variants. A fraction ``u`` in [0, 1) is drawn
  from the position's density and the error goes at step ``floor(u * n)``,
  where ``n`` is the number of steps the run takes without the error. ``n``
  is counted by running the task once with the scripted model and no
  injection (:func:`mas.sweep.runner.honest_steps`; milliseconds, no trace,
  checkpoints in memory): the scripted model is deterministic, so the real
  run's steps before the error are the very steps of that count.

Densities (Beta distributions; about 85 % of the mass in the named third):

| position | density | mass in first / middle / last third | mean u |
|---|---|---|---|
| ``left`` | Beta(1, 5) | 0.87 / 0.13 / 0.00 | 0.17 |
| ``mid`` | Beta(8, 8) | 0.09 / 0.82 / 0.09 | 0.50 |
| ``right`` | Beta(5, 1) | 0.00 / 0.13 / 0.87 | 0.83 |
| ``uniform`` | Beta(1, 1) | 1/3 each | 0.50 |

The scripted model fires at the first call at or after the planned step that
its responder really changes (:mod:`mas.scripted.model`), so the fired step
(``injected_error``) can sit later than the plan on branches that ignore the
injection; the metadata records both.
"""

from __future__ import annotations

import math
import random
from typing import Literal

from descriptor.layout import RunKey
from mas.config import ExperimentConfig
from mas.llm.injection import InjectionPlan

Position = Literal["left", "mid", "right", "uniform"]
POSITIONS: dict[str, tuple[float, float]] = {
    "left": (1.0, 5.0),
    "mid": (8.0, 8.0),
    "right": (5.0, 1.0),
    "uniform": (1.0, 1.0),
}
"""Position name -> the (a, b) of its Beta density over the run's relative step position."""
LEGACY_STEPS = 4
"""Without a step or position, the error goes at one of the first this-many steps (the old rule)."""


def place(fraction: float, n_steps: int) -> int:
    """The step at relative position ``fraction`` in [0, 1] of a run of ``n_steps`` steps.

    >>> place(0.0, 10), place(0.55, 10), place(1.0, 10)
    (0, 5, 9)
    """
    if n_steps < 1:
        return 0
    return min(n_steps - 1, max(0, math.floor(fraction * n_steps)))


def injection_plan(cfg: ExperimentConfig, key: RunKey) -> InjectionPlan | None:
    """Whether (and where) the scripted model injects a wrong step into run ``key``.

    ``inject.rate`` picks runs with a generator seeded by the run identity; a
    configured agent, step or position with rate 0 injects into every run. A
    plan with a ``position`` has ``fraction`` drawn and ``step`` still None:
    the runner places it once it knows the run's length (:func:`place`).
    """
    inj = cfg.inject
    exact = inj.agent is not None or inj.step is not None or inj.position is not None
    if inj.rate <= 0 and not exact:
        return None
    rng = random.Random(f"inject|{cfg.seed}|{key.benchmark}|{key.system}|{key.task_id}|{key.run_index}")
    if inj.rate > 0 and rng.random() >= inj.rate:
        return None
    if inj.position is not None:
        a, b = POSITIONS[inj.position]
        return InjectionPlan(agent=inj.agent, step=None, position=inj.position, fraction=rng.betavariate(a, b))
    step = inj.step if inj.step is not None else rng.randrange(0, LEGACY_STEPS)
    return InjectionPlan(agent=inj.agent, step=step)
