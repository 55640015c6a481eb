"""The orchestrator's contracts: the planner's subtasks, the critic's verdict on the parts, and the merge of parts.

- ``orchestrator.plan`` (the planner, no tools): ``{reasoning, subtasks, answer_artifact, confidence}`` with
  exactly one subtask per worker (:func:`plan_schema`); a reply without a usable list gives every worker the
  whole task (``subtasks_source = "fallback"`` in the planner's artifact), and a short list is filled with checks.
- ``orchestrator.critique`` (the critic, with tools): ``{reasoning, rejected, answer_artifact, confidence}``:
  ``rejected`` names the workers whose part is wrong; ``answer_artifact`` is the final answer the critic finds
  correct (compared with the aggregate by the controller).
- On a benchmark solved by acting, :func:`merge_parts` applies the state changes of the accepted parts to the
  run's environment, in worker order, each as the aggregator's traced tool call.

The test double's answers to both contracts live here, beside their prompts (:func:`scripted_plan`,
:func:`scripted_critique`): they read the call's hints (``workers``, ``parts``), never the prompt. How a task
splits and how a part is checked is knowledge of the task, not of the orchestrator: the double hands its play
of the run's task over as ``ctx.player``, and these answers ask it through :class:`Decomposer`; a task without
one gets generic subtasks, and a critic that accepts every part.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage

from benchmark.environment import Environment
from descriptor.events import ToolCall, ToolResult
from mas.llm.scripting import ScriptedContext, responder
from mas.topologies.agent import CONTENT_LIMIT, AgentSpec
from mas.topologies.environment import MAIN
from mas.topologies.node import state_id_of
from mas.tracing import current_tracer

PLAN_CONTRACT = "orchestrator.plan"
CRITIQUE_CONTRACT = "orchestrator.critique"
MAX_SUBTASK = 600
"""Characters of a subtask kept (a longer one is cut)."""


def plan_schema(workers: int) -> dict[str, Any]:
    """The planner's output contract: exactly ``workers`` subtasks (bounded, so a small model closes its JSON)."""
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string", "maxLength": 800},
            "subtasks": {"type": "array", "items": {"type": "string", "maxLength": MAX_SUBTASK},
                         "minItems": workers, "maxItems": workers},
            "answer_artifact": {"type": "string", "maxLength": 400},
            "confidence": {"type": "number"},
        },
        "required": ["reasoning", "subtasks", "answer_artifact", "confidence"],
    }


CRITIQUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 800},
        "rejected": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 12},
        "answer_artifact": {"type": "string"},
        "confidence": {"type": "number"},
    },
    "required": ["reasoning", "rejected", "answer_artifact", "confidence"],
}


def plan_instruction(workers: int) -> str:
    return (f"Split the task into exactly {workers} subtasks, one per worker, that together solve it; when it does "
            "not split that far, give the remaining workers a check of another part. Each subtask must make sense "
            "on its own. Reply with ONLY this JSON:\n"
            '{"reasoning": "<short>", "subtasks": ["<subtask of worker 1>", ...], '
            '"answer_artifact": "<the plan in one line>", "confidence": <number between 0 and 1>}')


CRITIQUE_INSTRUCTION = ("Check each worker's part against its subtask and the task (use a tool to check values). "
                        "Reply with ONLY this JSON:\n"
                        '{"reasoning": "<the errors you found, part by part>", "rejected": ["<worker whose part is '
                        'wrong>", ...], "answer_artifact": "<the final answer you find correct>", '
                        '"confidence": <number between 0 and 1>}')
FILL_SUBTASK = "Check the other workers' parts against the task and report what is wrong."
WHOLE_TASK = "Solve the whole task."


def subtasks_of(parsed: dict[str, Any] | None, workers: int) -> tuple[list[str], str]:
    """One subtask per worker from the planner's reply, and where they came from (``planner`` or ``fallback``).

    >>> subtasks_of({"subtasks": ["add", "check"]}, 3)
    (['add', 'check', "Check the other workers' parts against the task and report what is wrong."], 'planner')
    >>> subtasks_of({"subtasks": "add"}, 2)
    (['Solve the whole task.', 'Solve the whole task.'], 'fallback')
    """
    raw = (parsed or {}).get("subtasks")
    items = [" ".join(str(x).split())[:MAX_SUBTASK] for x in raw] if isinstance(raw, list) else []
    items = [x for x in items if x]
    if not items:
        return [WHOLE_TASK] * workers, "fallback"
    return (items + [FILL_SUBTASK] * workers)[:workers], "planner"


def rejected_of(parsed: dict[str, Any] | None, workers: Sequence[str]) -> list[str]:
    """The workers the critic rejects (names it gives that are workers; none when the reply has no list)."""
    raw = (parsed or {}).get("rejected")
    named = {str(x).strip() for x in raw} if isinstance(raw, list) else set()
    return [w for w in workers if w in named]


def part_changes(envs: dict[str, list[dict[str, Any]]], worker: str, env: Environment) -> list[dict[str, Any]]:
    """A worker's part on an environment: the state-changing calls its fork accepted after ``main`` (the base it
    forked from); its look-ups are left out."""
    base = len(envs.get(MAIN, []))
    return [a for a in envs.get(worker, [])[base:] if a["ok"] and env.changes_state(a["name"])]


def merge_parts(agent: AgentSpec, env: Environment, parts: Sequence[tuple[str, Sequence[dict[str, Any]]]],
                state_id: str | None = None) -> list[str]:
    """Apply each accepted part's state changes to ``env`` (the run's environment), traced as ``agent``'s calls.

    ``parts``: (worker, its accepted state-changing calls ``{"name", "args"}``) in worker order. A change that
    fails here (a conflict with an earlier part) is a failed ``tool_result``. Returns ``tool(args) -> output`` lines.
    """
    tracer = current_tracer()
    state_id = state_id_of() if state_id is None else state_id
    lines = []
    for worker, calls in parts:
        for call in calls:
            tracer.emit(agent.name, "tool_call", ToolCall(
                role=agent.role, content=f"apply {worker}'s change", tool=call["name"], arguments=call["args"]),
                state_id=state_id)
            result = env.call(call["name"], call["args"])
            tracer.emit(agent.name, "tool_result", ToolResult(
                tool=call["name"], ok=result.ok, output=result.output[:CONTENT_LIMIT],
                state_changing=result.ok and env.changes_state(call["name"])), state_id=state_id)
            lines.append(f"{call['name']} from {worker} -> {result.output[:300]}")
    return lines


@dataclass(kw_only=True, slots=True, frozen=True)
class Critique:
    """A scripted critic's verdict on the parts: the workers it rejects and the answer it finds correct."""

    rejected: list[str] = field(default_factory=list)
    answer: str
    reasoning: str | None = None
    """None: said from ``rejected`` (the wrong parts, or that every part is right)."""


@runtime_checkable
class Decomposer(Protocol):
    """What the test double's play of a task (``ctx.player``) tells the orchestrator's scripted planner and
    critic; :mod:`mas.scripted` implements it for the benchmarks it plays."""

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
def scripted_plan(ctx: ScriptedContext) -> str:
    """The double's planner: one subtask per worker (``hints["workers"]``), as the task's player splits it."""
    n = int(ctx.hints.get("workers") or 3)
    player = _decomposer(ctx)
    subtasks = (player.subtasks(ctx, n) if player is not None
                else [f"Part {k + 1}: {GENERIC[k % len(GENERIC)]}" for k in range(n)])
    return json.dumps({"reasoning": f"{n} parts, one per worker.", "subtasks": subtasks,
                       "answer_artifact": " | ".join(subtasks), "confidence": 0.8})


@responder(CRITIQUE_CONTRACT)
def scripted_critique(ctx: ScriptedContext) -> str | AIMessage:
    """The double's critic: the task's player checks the parts (``hints["parts"]``) and gives the answer."""
    player = _decomposer(ctx)
    verdict = player.critique(ctx, list(ctx.hints.get("parts") or [])) if player is not None else Critique(answer="0")
    if isinstance(verdict, AIMessage):
        return verdict
    rejected = list(verdict.rejected)
    reasoning = verdict.reasoning or (f"Wrong parts: {', '.join(rejected)}." if rejected else "Every part is right.")
    return json.dumps({"reasoning": reasoning, "rejected": rejected, "answer_artifact": verdict.answer,
                       "confidence": 0.85})
