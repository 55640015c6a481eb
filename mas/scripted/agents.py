"""The double's answer to the runtime's agent prompts (contract ``agent.turn``) and to an application system's
calls of the route's model (``app.turn``): the run's player plays it.

The player (:mod:`mas.scripted.players`, chosen by the benchmark's name) solves the task from its structured
fields: ``arith`` one calculator call per operation, WorkBench and BrowseComp by replaying the reference
actions, SciCode with a stub; a task no player plays gets a valid but uninformed answer. What a call is about
(a discussion's own and peers' answers, an orchestrator's subtask and parts) comes from its hints. Branches with
nothing meaningful to get wrong (the planner's fixed plan, unknown tasks) ignore ``ctx.inject``; the scripted
model then leaves the injection for a later step (see :mod:`mas.scripted.model`).
"""

from __future__ import annotations

from langchain_core.messages import AIMessage

from mas.scripted.scripting import ScriptedContext, responder
from mas.scripted.replies import tools_allowed, unplayed_turn


@responder("agent.turn")
@responder("app.turn")  # an application system's agent on the route's model (mas.apps): its node is its role
def agent_turn(ctx: ScriptedContext) -> str | AIMessage:
    role = str(ctx.metadata.get("mas_role", ""))
    if ctx.player is not None:
        return ctx.player.turn(ctx, role, tools_allowed(ctx))
    return unplayed_turn(ctx, role)
