"""What the double's players write and read back: answers as the runtime's JSON, tool calls in either protocol,
the tool calls a conversation made and the outputs they got, and the generic turns of a task nobody plays.

Reading tool results in the text tool protocol (``Tool <name> result:``, :func:`mas.topologies.prompts.tool_result_message`)
is reading a message protocol the way a model does: it is the only channel a text-protocol tool result has (the
runtime sends it as a plain message, with no metadata), so it stays.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from mas.llm.jsonparse import parse_json_object
from mas.scripted.scripting import ScriptedContext
from mas.topologies.prompts import CODE_HINT

Action = tuple[str, dict[str, Any]]

# A text-protocol tool result (mas.topologies.prompts.tool_result_message): the whole output, every line of it.
_TOOL_RESULT_RE = re.compile(r"^Tool \w+ result:\n(?P<out>.*)\nContinue: ", re.DOTALL)


def answer_json(reasoning: str, answer: str, confidence: float) -> str:
    return json.dumps({"reasoning": reasoning, "answer_artifact": answer, "confidence": confidence})


def tool_call(ctx: ScriptedContext, name: str, args: dict[str, Any]) -> AIMessage:
    """A call of tool ``name``: native ``tool_calls``, or a fenced JSON block on the ``scripted:text-tools`` variant."""
    if ctx.text_tools:
        return AIMessage(content="```json\n" + json.dumps({"name": name, "arguments": args}) + "\n```")
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:10]}"}])


def tools_allowed(ctx: ScriptedContext) -> bool:
    """Whether this call may call a tool (the runtime binds none once an agent has used all its tool calls)."""
    return "tools" in ctx.kwargs


def tool_outputs(ctx: ScriptedContext) -> list[str]:
    """The outputs of the accepted tool calls this conversation made (native or text protocol), oldest first."""
    outs = []
    for m in ctx.messages:
        if isinstance(m, ToolMessage):
            outs.append(str(m.content))
        elif isinstance(m, HumanMessage) and (hit := _TOOL_RESULT_RE.match(str(m.content))):
            outs.append(hit["out"])
    return outs


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


def as_int(text: str) -> int | None:
    try:
        return int(round(float(text.strip().replace(",", ""))))
    except ValueError:
        return None


def majority(values: list[str]) -> str | None:
    """The value held by a strict majority, if any."""
    for v in set(values):
        if values.count(v) * 2 > len(values):
            return v
    return None


PLAN = answer_json("Split into operations.", "1. Read the numbers. 2. Apply each operation in order. "
                   "3. Report the final count.", 0.8)
"""The planner's fixed plan (nothing in it to get wrong: it ignores the injection)."""


def discussion(ctx: ScriptedContext) -> str | None:
    """A discussion turn's first step (its own and its peers' answers in the call's hints) answers at once: it
    adopts a strict majority of its peers' answers, else keeps its own (injected: a revised wrong value)."""
    if any(isinstance(m, AIMessage) for m in ctx.messages):
        return None  # later steps of the turn go on with the work (tool results)
    peers = [p["answer"] for p in ctx.hints.get("peers") or []]
    own = ctx.hints.get("own")
    if not peers or own is None:
        return None
    mine = own["answer"]
    if ctx.inject:
        wrong = as_int(mine)
        return answer_json("Re-checking, I revise my value.", str((wrong or 0) + 7), 0.7)
    agreed = majority(peers)
    if agreed is not None and agreed != mine:
        return answer_json(f"Most peers found {agreed}; re-checking, I agree.", agreed, 0.8)
    return answer_json("My answer stands after reading the others.", mine, 0.85)


def unplayed_turn(ctx: ScriptedContext, role: str) -> str:
    """A turn on a task no player plays: a discussion's answer, the planner's plan, else a valid but uninformed
    answer (a code stub when the task wants code)."""
    if (reply := discussion(ctx)) is not None:
        return reply
    if role == "planner":
        return PLAN
    system = next((str(m.content) for m in ctx.messages if isinstance(m, SystemMessage)), "")
    if CODE_HINT in system:
        return answer_json("Not enough information to implement this.", "def solution(*args):\n    return None", 0.2)
    return answer_json("I could not work this out.", "0", 0.1)
