"""The scripted double's arithmetic: solving an ``arith`` chain one calculator call per operation.

Shared by the agent responders (:mod:`mas.scripted.agents`) and the
orchestrator's (:mod:`mas.scripted.orchestrator`).
"""

from __future__ import annotations

import json
import re
import uuid

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from benchmark import arith
from mas.scripted.model import ScriptedContext

# A text-protocol tool result (mas.topologies.prompts.tool_result_message): the whole output, every line of it.
_TOOL_RESULT_RE = re.compile(r"^Tool \w+ result:\n(?P<out>.*)\nContinue: ", re.DOTALL)


def answer_json(reasoning: str, answer: str, confidence: float) -> str:
    return json.dumps({"reasoning": reasoning, "answer_artifact": answer, "confidence": confidence})


def tool_outputs(ctx: ScriptedContext) -> list[str]:
    """The outputs of the accepted tool calls this conversation made (native or text protocol), oldest first."""
    outs = []
    for m in ctx.messages:
        if isinstance(m, ToolMessage):
            outs.append(str(m.content))
        elif isinstance(m, HumanMessage) and (hit := _TOOL_RESULT_RE.match(str(m.content))):
            outs.append(hit["out"])
    return outs


def as_int(text: str) -> int | None:
    try:
        return int(round(float(text.strip().replace(",", ""))))
    except ValueError:
        return None


def tool_call(ctx: ScriptedContext, expression: str) -> AIMessage:
    args = {"expression": expression}
    if ctx.text_tools:
        return AIMessage(content="```json\n" + json.dumps({"name": "calculator", "arguments": args}) + "\n```")
    return AIMessage(content="", tool_calls=[{"name": "calculator", "args": args, "id": f"call_{uuid.uuid4().hex[:10]}"}])


def solve_arith(ctx: ScriptedContext, tools_allowed: bool,
                chain: tuple[int, list[tuple[str, int]]] | None = None) -> str | AIMessage:
    """Solve the task's chain (or ``chain``: start and operations) one calculator call per operation."""
    parsed = chain or arith.parse(ctx.text())
    assert parsed is not None
    start, ops = parsed
    outs = tool_outputs(ctx)
    value = start if not outs else as_int(outs[-1])
    if value is None:
        value = start
    done = len(outs)
    if tools_allowed and done < len(ops):
        op, n = ops[done]
        if ctx.inject:
            n += 1  # the wrong step: an off-by-one operand
        return tool_call(ctx, f"{value} {op} {n}")
    for op, n in ops[done:]:
        value = arith.apply(value, op, n)
    if ctx.inject:
        value += 1
    steps = " then ".join(f"{op}{n}" for op, n in ops)
    return answer_json(f"Start at {start}, apply {steps}.", str(value), 0.9)


