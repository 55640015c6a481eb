"""Scripted answers to the runtime's agent prompts (contract ``agent.turn``).

The scripted agent reads an ``arith`` problem from the task and solves it one
calculator call per operation, like a careful agent would; other tasks get a
valid but uninformed answer. In discussion turns it adopts a strict majority
of its peers' answers. An injected step computes one wrong value, which then
propagates through the following steps. Branches with nothing meaningful to
get wrong (the planner's fixed plan, unknown tasks) ignore ``ctx.inject``; the
scripted model then leaves the injection for a later step (see :mod:`mas.scripted.model`).
"""

from __future__ import annotations

import json
import re
import uuid

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from benchmark import arith
from mas.scripted.model import ScriptedContext, responder
from mas.topologies.prompts import CODE_HINT

_PACKET_RE = re.compile(r"^\[(?P<sender>[^\]]+)\] answer: (?P<answer>.*?) \(confidence", re.MULTILINE)
_OWN_RE = re.compile(r"^Your previous answer: (?P<answer>.*)$", re.MULTILINE)
_TOOL_RESULT_RE = re.compile(r"^Tool \w+ result:\n(?P<out>.*?)\n", re.DOTALL)


def _answer_json(reasoning: str, answer: str, confidence: float) -> str:
    return json.dumps({"reasoning": reasoning, "answer_artifact": answer, "confidence": confidence})


def _tool_outputs(ctx: ScriptedContext) -> list[str]:
    outs = []
    for m in ctx.messages:
        if isinstance(m, ToolMessage):
            outs.append(str(m.content))
        elif isinstance(m, HumanMessage) and (hit := _TOOL_RESULT_RE.match(str(m.content))):
            outs.append(hit["out"])
    return outs


def _as_int(text: str) -> int | None:
    try:
        return int(round(float(text.strip().replace(",", ""))))
    except ValueError:
        return None


def _tool_call(ctx: ScriptedContext, expression: str) -> AIMessage:
    args = {"expression": expression}
    if ctx.text_tools:
        return AIMessage(content="```json\n" + json.dumps({"name": "calculator", "arguments": args}) + "\n```")
    return AIMessage(content="", tool_calls=[{"name": "calculator", "args": args, "id": f"call_{uuid.uuid4().hex[:10]}"}])


def _majority(values: list[str]) -> str | None:
    """The value held by a strict majority, if any."""
    for v in set(values):
        if values.count(v) * 2 > len(values):
            return v
    return None


def _discussion(ctx: ScriptedContext, last: str) -> str | None:
    peers = [m["answer"].strip() for m in _PACKET_RE.finditer(last)]
    own = _OWN_RE.search(last)
    if not peers or own is None:
        return None
    mine = own["answer"].strip()
    if ctx.inject:
        wrong = _as_int(mine)
        return _answer_json("Re-checking, I revise my value.", str((wrong or 0) + 7), 0.7)
    agreed = _majority(peers)
    if agreed is not None and agreed != mine:
        return _answer_json(f"Most peers found {agreed}; re-checking, I agree.", agreed, 0.8)
    return _answer_json("My answer stands after reading the others.", mine, 0.85)


def _solve_arith(ctx: ScriptedContext, tools_allowed: bool) -> str | AIMessage:
    parsed = arith.parse(ctx.text())
    assert parsed is not None
    start, ops = parsed
    outs = _tool_outputs(ctx)
    value = start if not outs else _as_int(outs[-1])
    if value is None:
        value = start
    done = len(outs)
    if tools_allowed and done < len(ops):
        op, n = ops[done]
        if ctx.inject:
            n += 1  # the wrong step: an off-by-one operand
        return _tool_call(ctx, f"{value} {op} {n}")
    for op, n in ops[done:]:
        value = arith.apply(value, op, n)
    if ctx.inject:
        value += 1
    steps = " then ".join(f"{op}{n}" for op, n in ops)
    return _answer_json(f"Start at {start}, apply {steps}.", str(value), 0.9)


@responder("agent.turn")
def agent_turn(ctx: ScriptedContext) -> str | AIMessage:
    system = next((str(m.content) for m in ctx.messages if isinstance(m, SystemMessage)), "")
    last = str(ctx.messages[-1].content)
    tools_allowed = "tools" in ctx.kwargs and "You have used all your tool calls" not in last
    role = ctx.metadata.get("mas_role", "")
    if (reply := _discussion(ctx, last)) is not None:
        return reply
    if role == "planner":
        return _answer_json("Split into operations.", "1. Read the numbers. 2. Apply each operation in order. "
                            "3. Report the final count.", 0.8)
    if arith.parse(ctx.text()) is not None:
        return _solve_arith(ctx, tools_allowed)
    if CODE_HINT in system:
        return _answer_json("Not enough information to implement this.", "def solution(*args):\n    return None", 0.2)
    return _answer_json("I could not work this out.", "0", 0.1)
