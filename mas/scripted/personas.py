"""Scripted answer to the persona contract (``personas.generate``): a different, fixed perspective per agent."""

from __future__ import annotations

import json

from mas.scripted.model import ScriptedContext, responder
from mas.topologies.personas import AGENTS_HEADER, CONTRACT

PERSPECTIVES = ("who checks every number twice", "who looks for the shortest correct route",
                "who questions each assumption", "who keeps to the task's exact wording",
                "who works backwards from the goal", "who tests the answer on an example",
                "who lists what is known first", "who looks for edge cases")


@responder(CONTRACT)
def scripted_personas(ctx: ScriptedContext) -> str:
    """``<role> <perspective>``, the perspectives taken in turn within each role (so peers differ)."""
    agents = json.loads(str(ctx.messages[-1].content).split(AGENTS_HEADER, 1)[1])
    seen: dict[str, int] = {}
    out = []
    for a in agents:
        k = seen.get(a["role"], 0)
        seen[a["role"]] = k + 1
        lap = f" (view {k // len(PERSPECTIVES) + 1})" if k >= len(PERSPECTIVES) else ""
        out.append({"agent": a["agent"], "persona": f"a {a['role']} {PERSPECTIVES[k % len(PERSPECTIVES)]}{lap}"})
    return json.dumps({"personas": out})
