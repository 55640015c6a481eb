"""The double's answer to the persona generator's contract (``personas.generate``): ``<role> <perspective>``,
the perspectives taken in turn within each role (so peers differ). The agents arrive as the call's
``persona_agents`` metadata, never read from the prompt."""

from __future__ import annotations

import json

from mas.scripted.scripting import ScriptedContext, responder
from mas.topologies.personas import CONTRACT

PERSPECTIVES = ("who checks every number twice", "who looks for the shortest correct route",
                "who questions each assumption", "who keeps to the task's exact wording",
                "who works backwards from the goal", "who tests the answer on an example",
                "who lists what is known first", "who looks for edge cases")


@responder(CONTRACT)
def personas(ctx: ScriptedContext) -> str:
    seen: dict[str, int] = {}
    out = []
    for a in ctx.metadata["persona_agents"]:
        k = seen.get(a["role"], 0)
        seen[a["role"]] = k + 1
        lap = f" (view {k // len(PERSPECTIVES) + 1})" if k >= len(PERSPECTIVES) else ""
        out.append({"agent": a["agent"], "persona": f"a {a['role']} {PERSPECTIVES[k % len(PERSPECTIVES)]}{lap}"})
    return json.dumps({"personas": out})
