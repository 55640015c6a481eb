"""The double's answers to the orchestrator's contracts (``orchestrator.plan``, ``orchestrator.critique``).

They read the call's hints (``workers``, ``parts``), never the prompt. How a task splits and how a part is
checked is knowledge of the task, not of the orchestrator: the double hands its play of the run's task over as
``ctx.player``, and these answers ask it through :class:`Decomposer`; a task without one gets generic
subtasks, and a critic that accepts every part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from langchain_core.messages import AIMessage

from mas.scripted.scripting import ScriptedContext, responder
from mas.topologies.decomposition import CRITIQUE_CONTRACT, PLAN_CONTRACT


@dataclass(kw_only=True, slots=True, frozen=True)
class Critique:
    """A scripted critic's verdict on the parts: the workers it rejects and the answer it finds correct."""

    rejected: list[str] = field(default_factory=list)
    answer: str
    reasoning: str | None = None
    """None: said from ``rejected`` (the wrong parts, or that every part is right)."""


@runtime_checkable
class Decomposer(Protocol):
    """What the double's play of a task (``ctx.player``) tells the orchestrator's scripted planner and critic;
    the players of :mod:`mas.scripted` implement it for the benchmarks they play."""

    def subtasks(self, ctx: ScriptedContext, workers: int) -> list[str]:
        """One subtask per worker."""
        ...

    def critique(self, ctx: ScriptedContext, parts: list[dict[str, str]]) -> Critique | AIMessage:
        """The verdict on the workers' parts (the ``parts`` hint), or a tool call on the way to it."""
        ...


GENERIC = ("Work out what the task asks and solve it.", "Check each step of the solution.",
           "Check that the final answer has the form the task asks for.")
"""The subtasks of a task the double cannot split (numbered, cycled)."""


def _decomposer(ctx: ScriptedContext) -> Decomposer | None:
    return ctx.player if isinstance(ctx.player, Decomposer) else None


@responder(PLAN_CONTRACT)
def plan(ctx: ScriptedContext) -> str:
    """The double's planner: one subtask per worker (``hints["workers"]``), as the task's player splits it."""
    n = int(ctx.hints.get("workers") or 3)
    player = _decomposer(ctx)
    subtasks = (player.subtasks(ctx, n) if player is not None
                else [f"Part {k + 1}: {GENERIC[k % len(GENERIC)]}" for k in range(n)])
    return json.dumps({"reasoning": f"{n} parts, one per worker.", "subtasks": subtasks,
                       "answer_artifact": " | ".join(subtasks), "confidence": 0.8})


@responder(CRITIQUE_CONTRACT)
def critique(ctx: ScriptedContext) -> str | AIMessage:
    """The double's critic: the task's player checks the parts (``hints["parts"]``) and gives the answer."""
    player = _decomposer(ctx)
    verdict = player.critique(ctx, list(ctx.hints.get("parts") or [])) if player is not None else Critique(answer="0")
    if isinstance(verdict, AIMessage):
        return verdict
    rejected = list(verdict.rejected)
    reasoning = verdict.reasoning or (f"Wrong parts: {', '.join(rejected)}." if rejected else "Every part is right.")
    return json.dumps({"reasoning": reasoning, "rejected": rejected, "answer_artifact": verdict.answer,
                       "confidence": 0.85})
