"""The scripted double plays a benchmark solved by acting (WorkBench): it replays the task's reference actions.

The runner hands the double the task's reference actions
(``ctx.oracle_actions``); an acting agent makes them one tool call per step
through the real tool loop, so scripted sweeps exercise the tools, the
environment's state (checkpointed as action logs, replayed on resume) and the
outcome evaluation end to end. Per role:

- an agent of a parallel stage (solver, debater, worker, group member)
  makes every reference action on its own environment, then answers
  ``Done: <actions>`` (or ``Nothing to do.``);
- an orchestrator worker makes the actions named in its subtask (see
  :mod:`mas.scripted.orchestrator`); the aggregator answers with the changes
  the merged parts left in the environment;
- in a discussion turn (it sees its own earlier answer and its peers'), it
  makes the actions the strict majority of its peers made and it did not,
  then keeps its answer.

Injection (``ctx.inject``) alters one action: its last argument (an id one
higher, any other value with ``" (altered)"`` appended), so the run's one
decisive error is a side-effecting tool call. Answer steps ignore it, so it
fires only on an action.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

from langchain_core.messages import AIMessage

from mas.llm.jsonparse import parse_json_object
from mas.scripted.model import ScriptedContext
from mas.topologies.environment import parse_actions, render_action

Action = tuple[str, dict[str, Any]]

ANSWERING_ROLES = ("critic", "planner", "supervisor")


def function_name(name: str) -> str:
    """The tool name models see (WorkBench: ``calendar.delete_event`` -> ``calendar__delete_event``)."""
    return name.replace(".", "__")


def oracle(ctx: ScriptedContext) -> list[Action]:
    return [(a["name"], dict(a["args"])) for a in ctx.oracle_actions or []]


def calls_made(ctx: ScriptedContext) -> list[Action]:
    """The tool calls this conversation already made (native ``tool_calls`` or text-protocol JSON blocks)."""
    out: list[Action] = []
    for m in ctx.messages:
        if not isinstance(m, AIMessage):
            continue
        if m.tool_calls:
            out += [(c["name"], dict(c.get("args") or {})) for c in m.tool_calls]
        elif (obj := parse_json_object(str(m.content))) and isinstance(obj.get("name"), str) and "arguments" in obj:
            out.append((obj["name"], dict(obj["arguments"])))
    return out


def alter(action: Action) -> Action | None:
    """The injected wrong action: its last argument changed (None when it has none)."""
    name, args = action
    if not args:
        return None
    key = list(args)[-1]
    value = str(args[key])
    wrong = str(int(value) + 1).zfill(len(value)) if value.isdigit() else f"{value} (altered)"
    return name, {**args, key: wrong}


def _call(ctx: ScriptedContext, action: Action) -> AIMessage:
    name, args = function_name(action[0]), action[1]
    if ctx.text_tools:
        return AIMessage(content="```json\n" + json.dumps({"name": name, "arguments": args}) + "\n```")
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:10]}"}])


def _answer(reasoning: str, answer: str, confidence: float = 0.9) -> str:
    return json.dumps({"reasoning": reasoning, "answer_artifact": answer, "confidence": confidence})


def done_text(actions: list[Action]) -> str:
    return "Done: " + "; ".join(render_action(n, a) for n, a in actions) if actions else "Nothing to do."


def _missing(wanted: list[Action], have: list[Action]) -> list[Action]:
    """``wanted`` minus ``have`` as multisets, in ``wanted``'s order."""
    left = Counter(render_action(n, a) for n, a in have)
    out = []
    for n, a in wanted:
        key = render_action(n, a)
        if left[key]:
            left[key] -= 1
        else:
            out.append((n, a))
    return out


def _majority(values: list[str]) -> str | None:
    for v in set(values):
        if values.count(v) * 2 > len(values):
            return v
    return None


def todo_of(ctx: ScriptedContext, last: str) -> tuple[list[Action], str | None]:
    """The actions this turn is to make, and the answer to keep when it only catches up (else None)."""
    if (sub := ctx.hints.get("subtask")) is not None:  # an orchestrator worker: the actions its subtask names
        return parse_actions(sub.split(": ", 1)[-1]), None
    own = ctx.hints.get("own")  # a discussion turn: its own and its peers' answers and changes are hints
    if own is None:
        return oracle(ctx), None
    mine = own.get("changes")
    peers = [p["changes"].strip() for p in ctx.hints.get("peers") or [] if p.get("changes") is not None]
    agreed = _majority(peers)
    if mine is None or agreed is None or agreed == mine.strip():
        return [], own["answer"]
    return _missing(parse_actions(agreed), parse_actions(mine)), own["answer"]


def workbench_turn(ctx: ScriptedContext, role: str, tools_allowed: bool) -> str | AIMessage:
    """One step of an acting agent (see the module docstring)."""
    last = str(ctx.messages[-1].content) if ctx.messages else ""
    first = next((str(m.content) for m in ctx.messages[1:2]), last)  # the task message with the agent's context
    if role in ANSWERING_ROLES:
        return _answer("I checked the reports against the request.", "The changes match the request.", 0.8)
    if role == "aggregator":  # the accepted parts are merged already: say what the environment now holds
        now = ctx.hints.get("changes_now")
        return _answer("The accepted parts are in the environment.", done_text(parse_actions(now) if now is not None
                                                                                else []))
    todo, keep = todo_of(ctx, first)
    made = calls_made(ctx)
    if tools_allowed and len(made) < len(todo):
        action = todo[len(made)]
        if ctx.inject and (wrong := alter(action)) is not None:
            action = wrong
        return _call(ctx, action)
    if keep is not None:
        return _answer("I made the changes most of the others made, if I had not.", keep, 0.85)
    return _answer("I made the changes the request asks for, one tool call each.", done_text(todo))
