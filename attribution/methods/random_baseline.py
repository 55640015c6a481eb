"""``random``: an agent and a step drawn uniformly, independently (the Who&When random baseline)."""

from __future__ import annotations

import hashlib
import random

from attribution.llm.prompting import ENVIRONMENT_KEYS
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.sources.trajectory import Trajectory


def case_rng(seed: int, case_id: str) -> random.Random:
    """A generator fixed by ``seed`` and the case, independent of case order."""
    digest = hashlib.sha256(f"{seed}:{case_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@register_method("random")
def random_method() -> Method:
    """Uniform over the distinct actors (by normalised name; the environment, a human or a terminal, only when
    nobody else speaks: in Who&When the responsible agent is always an actor, and drawing the environment too
    understated the baseline, 0.29 against 0.39 on the algorithm-generated dev records) and, independently, over
    the steps."""

    async def run(trajectory: Trajectory, ctx: MethodContext) -> Prediction:
        rng = case_rng(ctx.seed, trajectory.id)
        first_name: dict[str, str] = {}
        for s in trajectory.steps:
            first_name.setdefault(s.agent_key, s.agent)
        actors = [k for k in first_name if k not in ENVIRONMENT_KEYS]
        keys = actors or list(first_name)
        agent = first_name[rng.choice(keys)]
        step = rng.randrange(trajectory.n_steps)
        return Prediction(agent=agent, step=step, confidence=1.0 / len(keys), details={"n_agents": len(keys)})

    return run
