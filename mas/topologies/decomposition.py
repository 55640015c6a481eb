"""The orchestrator's contracts: the planner's subtasks, the critic's verdict on the parts, and the merge of parts.

- ``orchestrator.plan`` (the planner, no tools): ``{reasoning, subtasks, answer_artifact, confidence}`` with
  exactly one subtask per worker (:func:`plan_schema`); a reply without a usable list gives every worker the
  whole task (``subtasks_source = "fallback"`` in the planner's artifact), and a short list is filled with checks.
- ``orchestrator.critique`` (the critic, with tools): ``{reasoning, rejected, answer_artifact, confidence}``:
  ``rejected`` names the workers whose part is wrong; ``answer_artifact`` is the final answer the critic finds
  correct (compared with the aggregate by the controller).
- On a benchmark solved by acting, :func:`merge_parts` applies the state changes of the accepted parts to the
  run's environment, in worker order, each as the aggregator's traced tool call.

The planner is told the number of workers and the critic the parts as the calls' hints (``workers``, ``parts``),
which a test double reads instead of the prompt (:mod:`mas.scripted.orchestrator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmark.environment import Environment
from descriptor.events import ToolCall, ToolResult
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
