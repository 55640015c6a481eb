"""Dynamic personas: one model call per run specialises every agent within its structural role.

``mas.persona_mode``:

- ``"static"`` (the default, the project's behaviour before): the list
  ``mas.personas`` is handed out round-robin to the agents of each parallel
  stage (debaters, workers, group members); empty by default;
- ``"generated"`` (the seed's dynamic personas): before the graph starts, one
  call (contract ``personas.generate``, route of the role ``persona_generator``)
  reads the task and the system's declared agents with their roles' briefs
  and gives each agent a persona: a perspective or expertise for this task.
  The assignment is traced as a ``plan`` event by ``system:personas``
  (payload :class:`~descriptor.events.PersonaAssignment`), recorded in the
  run's metadata (``personas``), and a resumed run reuses it.

A persona specialises, never overrides: it is one line after the role's
brief in the system prompt, followed by the tool protocol and the answer
format, and the stage's own instruction comes in the task message; it is cut
to :data:`MAX_PERSONA` characters of a single line. An agent the reply leaves
out gets no persona; a reply with no usable assignment gives none at all
(the reason is traced).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from descriptor.events import PersonaAssignment
from mas.llm.call import call_llm, llm_event_fields
from mas.topologies.agent import RunContext
from mas.topologies.declaration import Topology
from mas.tracing import current_tracer

CONTRACT = "personas.generate"
ROLE = "persona_generator"
ACTOR = "system:personas"
MAX_PERSONA = 160
"""Characters of a persona kept (one line)."""
AGENTS_HEADER = "Agents (JSON):"

INSTRUCTIONS = """You write personas for the agents of a multi-agent system about to work on the task below. A persona
specialises one agent within its structural role for this task: a perspective or an expertise, in one short phrase
(e.g. "a bookkeeper who double-checks every sum"). It never changes the role's rules, the stage's instructions or the
tools the agent must use. Give agents of the same role different personas.
Reply with ONLY this JSON:
{"personas": [{"agent": "<agent name>", "persona": "<one short phrase>"}, ...]}"""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"personas": {"type": "array", "maxItems": 32, "items": {
        "type": "object", "properties": {"agent": {"type": "string", "maxLength": 40},
                                         "persona": {"type": "string", "maxLength": MAX_PERSONA}},
        "required": ["agent", "persona"]}}},
    "required": ["personas"],
}


def agents_of(topology: Topology, rt: RunContext) -> list[dict[str, str]]:
    """The system's declared agents with their roles and the roles' briefs (what the generator specialises)."""
    briefs = {r.name: r.brief for r in topology.roles}
    return [{"agent": p.name, "role": p.role or "", "brief": briefs.get(p.role or "", "")}
            for p in topology.agents(rt.cfg.mas).agents()]


def parse_personas(parsed: dict[str, Any] | None, agents: Sequence[str]) -> dict[str, str]:
    """Agent -> persona from a reply: known agents only, one line each, cut to :data:`MAX_PERSONA` characters.

    >>> parse_personas({"personas": [{"agent": "a", "persona": " careful\\n  checker "}, {"agent": "x", "persona": "?"}]},
    ...                ["a", "b"])
    {'a': 'careful checker'}
    """
    rows = (parsed or {}).get("personas")
    out: dict[str, str] = {}
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        agent, text = str(row.get("agent", "")).strip(), " ".join(str(row.get("persona", "")).split())
        if agent in agents and text and agent not in out:
            out[agent] = text[:MAX_PERSONA]
    return out


async def generate_personas(rt: RunContext, topology: Topology) -> dict[str, str]:
    """One call assigns every declared agent of ``topology`` a persona for this task; traced; returned.

    Raises :class:`~mas.llm.call.LLMCallError` when the call fails for good
    (the run fails; it does not go on without what was asked for).
    """
    agents = agents_of(topology, rt)
    messages = [SystemMessage(INSTRUCTIONS),
                HumanMessage(f"Task:\n{rt.question}\n\n{AGENTS_HEADER}\n{json.dumps(agents, ensure_ascii=False)}")]
    res = await call_llm(rt.models.for_role(ROLE), messages, contract=CONTRACT, actor=ACTOR, step=None,
                         json_schema=SCHEMA, metadata={"persona_agents": agents})
    personas = parse_personas(res.parsed, [a["agent"] for a in agents])
    current_tracer().emit(ACTOR, "plan", PersonaAssignment(
        personas=personas, content="; ".join(f"{a}: {p}" for a, p in personas.items())[:4000],
        error=None if personas else "the reply assigned no persona to any agent of the system",
    ), **llm_event_fields(res))
    return personas
