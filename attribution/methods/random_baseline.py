"""``random``: an agent and a step drawn uniformly, independently (the Who&When random baseline)."""

from __future__ import annotations

import hashlib
import random

from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.sources.trajectory import Trajectory


def case_rng(seed: int, case_id: str) -> random.Random:
    """A generator fixed by ``seed`` and the case, independent of case order."""
    digest = hashlib.sha256(f"{seed}:{case_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@register_method("random")
def random_method() -> Method:
    """Uniform over the distinct agents (by normalised name) and, independently, over the steps."""

    async def run(trajectory: Trajectory, ctx: MethodContext) -> Prediction:
        rng = case_rng(ctx.seed, trajectory.id)
        first_name: dict[str, str] = {}
        for s in trajectory.steps:
            first_name.setdefault(s.agent_key, s.agent)
        keys = list(first_name)
        agent = first_name[rng.choice(keys)]
        step = rng.randrange(trajectory.n_steps)
        return Prediction(agent=agent, step=step, confidence=1.0 / len(keys), details={"n_agents": len(keys)})

    return run
