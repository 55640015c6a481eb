"""What a topology declares about itself, in one place beside its graph builder.

A :class:`Topology` names its graph builder, its structural roles (each with
the brief its agents' system prompts open with), and its agents with the
message edges between them (:class:`AgentGraph`, from the config). Everything
else is derived from the declaration: the registry of systems
(:mod:`mas.systems`), the routes a run may call (every declared role), the
agent picture (:mod:`mas.topologies.pictures`; the workflow picture comes
from the compiled graph), and the agents generated personas specialise.

>>> from mas.config import MasSettings
>>> from mas.topologies.debate import TOPOLOGY
>>> [p.name for p in TOPOLOGY.agents(MasSettings(agents=2)).agents()]
['debater_0', 'debater_1']
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from descriptor.registry import Registry
from mas.config import MasSettings

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

    from mas.topologies.agent import AgentSpec, RunContext

TOOLS_NODE = "tools"
"""The participant that stands for an agent's tools in the agent picture (tool calls are not messages)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Role:
    """A structural role: its name (the route key ``roles.<name>``) and the brief its system prompt opens with."""

    name: str
    brief: str

    def agent(self, name: str, *, tools: bool = True, persona: str | None = None) -> AgentSpec:
        """An agent called ``name`` in this role."""
        from mas.topologies.agent import AgentSpec

        return AgentSpec(name=name, role=self.name, brief=self.brief, tools=tools, persona=persona)


@dataclass(kw_only=True, frozen=True, slots=True)
class Participant:
    """Someone in the agent picture: an agent (with its role), a system actor, the tools or the user."""

    name: str
    row: int
    """Row in the agent picture (peers share one)."""
    role: str | None = None
    """The agent's structural role; None for system actors, tools and the user."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Message:
    """A directed edge of the agent picture.

    Every edge to a participant other than :data:`TOOLS_NODE` is a message
    exactly as the trace's ``payload.sends`` records it (same ``from`` and
    ``to``; a test checks the two agree). Edges to the tools stand for the
    agent's ``tool_call`` events, which carry no ``sends``.
    """

    source: str
    target: str
    label: str = ""
    dashed: bool = False
    """System-mediated messages and tool use are drawn dashed."""


@dataclass(kw_only=True, frozen=True, slots=True)
class AgentGraph:
    """The participants of a system and the messages between them."""

    participants: tuple[Participant, ...]
    messages: tuple[Message, ...]

    def agents(self) -> list[Participant]:
        """The participants that are agents (have a role), in declaration order."""
        return [p for p in self.participants if p.role is not None]

    def rows(self) -> dict[str, int]:
        return {p.name: p.row for p in self.participants}

    def sends(self, source: str, *labels: str) -> list[dict[str, str]]:
        """The messages ``source`` sends (those labelled one of ``labels``, if any are given) as a trace event's
        ``sends``, in declaration order; edges to :data:`TOOLS_NODE` are tool calls, not messages.

        >>> g = AgentGraph(participants=(), messages=(Message(source="a", target="b", label="answer"),
        ...                                            Message(source="a", target=TOOLS_NODE)))
        >>> g.sends("a")
        [{'from': 'a', 'to': 'b'}]
        """
        return [{"from": m.source, "to": m.target} for m in self.messages
                if m.source == source and m.target != TOOLS_NODE and (not labels or m.label in labels)]


@dataclass(kw_only=True, frozen=True, slots=True)
class Topology:
    """One system: how to build its graph, its roles, its agents and their messages."""

    name: str
    build: Callable[[RunContext], StateGraph]
    """An uncompiled LangGraph ``StateGraph`` for one run (see :mod:`mas.systems`)."""
    roles: tuple[Role, ...]
    agents: Callable[[MasSettings], AgentGraph]
    uses_judge: bool = False
    """Whether its controller or final vote calls the ``judge`` route."""
    single_agent: bool = False
    """A single-agent baseline (``sas``, ``sas_matched``): no agent talks to another, nothing loops through the
    termination controller."""
    description: str = ""
    """What the system does, in one line (``list-systems``); empty: the first paragraph of ``build``'s docstring."""

    def summary(self) -> str:
        """The one line ``list-systems`` prints for this system (:func:`descriptor.describe.describe`)."""
        from descriptor.describe import describe

        return describe(self) or describe(self.build)

    def role_names(self) -> tuple[str, ...]:
        """Every role whose route a run of this system may call (``judge`` included when it uses one)."""
        return (*(r.name for r in self.roles), *(("judge",) if self.uses_judge else ()))

    # How a run drives the graph. The built-in topologies read the task from the run's context and leave the
    # runner's fields in their state; an application system (:mod:`mas.apps`) overrides these.

    def graph_input(self, rt: RunContext) -> dict[str, Any]:
        """The input a new run's graph is invoked with."""
        return {}

    def run_config(self, rt: RunContext, config: dict[str, Any]) -> dict[str, Any]:
        """The LangGraph config a run invokes the graph with: the caller's ``config`` and what the system adds."""
        return config

    def fork_update(self, notes: list[str]) -> dict[str, Any]:
        """The state update a rollback forks a checkpoint with, telling the resumed agents ``notes``; an empty one:
        resume the checkpoint as it is."""
        return {"notes": notes}

    def outcome(self, state: dict[str, Any]) -> dict[str, Any]:
        """The finished graph's state as the runner reads it: ``answer`` and ``stages`` (see :mod:`mas.systems`)."""
        return state


SYSTEMS: Registry[Topology] = Registry("system", "mas_econ.systems")
"""System name -> topology declaration: each topology module registers its own (:func:`register_system`),
installed packages through the ``mas_econ.systems`` entry-point group, other code as a plugin
(``--plugin MODULE``). Read it through :mod:`mas.systems`, which imports the built-in topologies."""


def register_system(topology: Topology) -> Topology:
    """Add ``topology`` to :data:`SYSTEMS` under its name; returns it (``TOPOLOGY = register_system(Topology(...))``).

    Its origin is the module that registers it (``mas.topologies.sas:sas``), so two modules claiming one name
    are told apart even when they share a graph builder.
    """
    module = sys._getframe(1).f_globals.get("__name__", "?")
    return SYSTEMS.register(topology.name, topology, origin=f"{module}:{topology.name}")


def tool_edges(agents: list[str]) -> list[Message]:
    """The dashed edges from tool-using agents to the tools."""
    return [Message(source=a, target=TOOLS_NODE, dashed=True) for a in agents]
