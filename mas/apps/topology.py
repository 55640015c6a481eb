"""An application system's declaration: the user's graph as a :class:`~mas.topologies.declaration.Topology`.

The conventions (each with its override, ``[systems.<name>]``):

- the task enters as the graph's input: ``{"messages": [HumanMessage(<task>)]}``, or ``{<input_key>: <task>}``;
- the answer is read from the final state: the text of the last AI message of ``messages``, or the value of
  ``answer_key`` (a message's text, a string, anything else as JSON), read as the built-in agents' answers are
  (:func:`~mas.topologies.agent.parse_answer`: a JSON ``answer_artifact``, a ``\\boxed{}``, else the whole text);
- a rollback's note reaches the resumed agents as a human message appended to ``messages`` (a graph without
  ``messages`` is resumed from the checkpoint as it is, told nothing).

The graph is compiled once per process and every run gets it with the run's checkpointer (as the built-in
graphs are, :mod:`mas.sweep.graphs`); its agents are its nodes (their names are the roles routes are chosen by).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage

from descriptor.events import FinalAnswer
from mas.apps.handler import APP_AGENT, AppRunHandler, message_text
from mas.config import MasSettings
from mas.llm.jsonparse import parse_json_object
from mas.topologies.agent import CONTENT_LIMIT, parse_answer
from mas.topologies.declaration import TOOLS_NODE, AgentGraph, Message, Participant, Topology
from mas.tracing import current_tracer

if TYPE_CHECKING:
    from mas.topologies.agent import RunContext

APP_ACTOR = "system:app"
"""The system actor that publishes an application system's answer (its ``finalize`` event)."""
MESSAGES = "messages"

_handler: contextvars.ContextVar[AppRunHandler | None] = contextvars.ContextVar("mas_app_handler", default=None)


class Precompiled:
    """A graph the factory compiled itself, standing where a ``StateGraph`` is expected: compiling it gives it back
    (with ``checkpointer``, a copy using that one), so its own compile options stay."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def compile(self, checkpointer: Any = None, **_: Any) -> Any:
        return self.graph if checkpointer is None else self.graph.copy({"checkpointer": checkpointer})


def read_answer(state: dict[str, Any], answer_key: str | None) -> tuple[str | None, str | None]:
    """The answer's text in a final state, and the id of the message holding it (None when not a message).

    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> state = {"messages": [HumanMessage("2 + 2?"), AIMessage("4", id="m1"), HumanMessage("thanks")],
    ...          "verdict": {"ok": True}}
    >>> read_answer(state, None), read_answer(state, "verdict"), read_answer(state, "missing")
    (('4', 'm1'), ('{"ok": true}', None), (None, None))
    """
    value = state.get(answer_key or MESSAGES)
    if answer_key is None or (isinstance(value, list) and value and isinstance(value[-1], BaseMessage)):
        messages = value if isinstance(value, list) else []
        last = next((m for m in reversed(messages) if isinstance(m, BaseMessage) and m.type == "ai"), None)
        return (None, None) if last is None else (message_text(last), last.id)
    if value is None:
        return None, None
    if isinstance(value, BaseMessage):
        return message_text(value), value.id
    return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)), None


@dataclass(kw_only=True, frozen=True, slots=True, eq=False)
class AppTopology(Topology):
    """A LangGraph graph the user already has, run as a system (see the module docstring)."""

    graph: str
    """Where it comes from (``MODULE:FACTORY``), for messages."""
    input_key: str | None = None
    answer_key: str | None = None
    has_messages: bool = True
    """The graph's state has ``messages`` (where a rollback's note goes)."""

    def graph_input(self, rt: RunContext) -> dict[str, Any]:
        if self.input_key is None:
            return {MESSAGES: [HumanMessage(rt.question)]}
        return {self.input_key: rt.question}

    def run_config(self, rt: RunContext, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with the run's handler among its callbacks (:mod:`mas.apps.handler`)."""
        handler = AppRunHandler(rt, asyncio.get_running_loop())
        _handler.set(handler)  # the run's context: outcome() names the answer's author from what it saw
        return {**config, "callbacks": [*(config.get("callbacks") or []), handler]}

    def fork_update(self, notes: list[str]) -> dict[str, Any]:
        if not notes or not self.has_messages:
            return {}
        return {MESSAGES: [HumanMessage(n) for n in notes]}

    def outcome(self, state: dict[str, Any]) -> dict[str, Any]:
        """``{"answer": ...}`` read from the final state (nothing when it holds none), published as the run's
        ``finalize`` event."""
        text, message_id = read_answer(state, self.answer_key)
        if text is None or not text.strip():
            return {}
        answer = parse_answer(parse_json_object(text), text)
        handler = _handler.get()
        author = None
        if handler is not None:
            author = handler.authors.get(message_id or "") or handler.last_author
        current_tracer().emit(APP_ACTOR, "finalize", FinalAnswer(
            answer_artifact=answer.answer_artifact, confidence=answer.confidence, reasoning=answer.reasoning,
            source_agent=author or APP_AGENT, content=text[:CONTENT_LIMIT],
            selection=f"state key {self.answer_key}" if self.answer_key else "last AI message"))
        return {"answer": answer.to_dict()}


def agent_graph_of(compiled: Any) -> AgentGraph:
    """The graph's nodes as the agent picture's participants (a ``ToolNode`` as tools), its edges as the messages
    between them (dashed: they pass through the graph's state), each node in the row of its distance from the
    start."""
    from langgraph.prebuilt import ToolNode

    drawn = compiled.get_graph()
    ends = {"__start__", "__end__"}
    depth = {"__start__": 0}
    frontier = ["__start__"]
    while frontier:
        nxt = []
        for node in frontier:
            for e in drawn.edges:
                if e.source == node and e.target not in depth:
                    depth[e.target] = depth[node] + 1
                    nxt.append(e.target)
        frontier = nxt
    participants = []
    for name, node in drawn.nodes.items():
        if name in ends:
            continue
        tools = isinstance(getattr(node, "data", None), ToolNode) or name == TOOLS_NODE
        participants.append(Participant(name=name, role=None if tools else name, row=max(0, depth.get(name, 1) - 1)))
    messages = tuple(Message(source=e.source, target=e.target, label=str(e.data or ""), dashed=True)
                     for e in drawn.edges if e.source not in ends and e.target not in ends)
    return AgentGraph(participants=tuple(participants), messages=messages)


def agents_fn(graph: AgentGraph) -> Any:
    """The declaration's ``agents`` callable: the same picture whatever the settings."""

    def agents(mas: MasSettings) -> AgentGraph:
        return graph

    return agents
