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


from langchain_core.messages import AIMessage, SystemMessage

from benchmark import arith
from mas.scripted.arith import answer_json, as_int, solve_arith
from mas.scripted.browsecomp import browsecomp_turn, is_browsecomp
from mas.scripted.model import ScriptedContext, responder
from mas.scripted.orchestrator import orchestrated_turn
from mas.scripted.scicode import is_scicode, scicode_turn
from mas.scripted.workbench import workbench_turn
from mas.topologies.prompts import CODE_HINT



def _majority(values: list[str]) -> str | None:
    """The value held by a strict majority, if any."""
    for v in set(values):
        if values.count(v) * 2 > len(values):
            return v
    return None


def _discussion(ctx: ScriptedContext) -> str | None:
    """A discussion turn's first step (its own and its peers' answers in the call's hints) answers at once."""
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
    agreed = _majority(peers)
    if agreed is not None and agreed != mine:
        return answer_json(f"Most peers found {agreed}; re-checking, I agree.", agreed, 0.8)
    return answer_json("My answer stands after reading the others.", mine, 0.85)


@responder("agent.turn")
def agent_turn(ctx: ScriptedContext) -> str | AIMessage:
    system = next((str(m.content) for m in ctx.messages if isinstance(m, SystemMessage)), "")
    last = str(ctx.messages[-1].content)
    tools_allowed = "tools" in ctx.kwargs and "You have used all your tool calls" not in last
    role = ctx.metadata.get("mas_role", "")
    if ctx.oracle_actions is not None:  # a benchmark with an environment: replay its reference actions
        return (browsecomp_turn if is_browsecomp(ctx) else workbench_turn)(ctx, role, tools_allowed)
    if ctx.hints.get("subtask") is not None or role == "aggregator":  # an orchestrator's decomposed cycle
        if (reply := orchestrated_turn(ctx, role, tools_allowed)) is not None:
            return reply
    if (reply := _discussion(ctx)) is not None:
        return reply
    if role == "planner":
        return answer_json("Split into operations.", "1. Read the numbers. 2. Apply each operation in order. "
                            "3. Report the final count.", 0.8)
    if arith.parse(ctx.text()) is not None:
        return solve_arith(ctx, tools_allowed)
    if is_scicode(ctx):
        return scicode_turn(ctx)
    if CODE_HINT in system:
        return answer_json("Not enough information to implement this.", "def solution(*args):\n    return None", 0.2)
    return answer_json("I could not work this out.", "0", 0.1)
