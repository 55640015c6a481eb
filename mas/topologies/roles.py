"""Roles, personas and context selection shared by the multi-agent topologies.

An agent sees only: the task, the relay packets selected for it, its own
previous artifact, the tool outputs it received, and any rollback notes.
:func:`turn` runs one agent turn (LLM steps and tool calls until it answers)
like :func:`mas.topologies.agent.agent_turn`, but picks the answer's event type from
the answer itself (``revise`` when an agent changes its answer) and can use
another output contract and tool set (the supervisor's routing).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from descriptor.events import AgentOutput, EventType, ToolCall
from mas.llm.call import ToolCallRequest, call_llm, llm_event_fields
from mas.tools.builtin import TOOLS
from mas.topologies.agent import (
    CONTENT_LIMIT,
    AgentSpec,
    Answer,
    RunContext,
    opening_messages,
    parse_answer,
    run_tool_calls,
)
from mas.topologies.prompts import ANSWER_SCHEMA, force_answer_note, relay_packet
from mas.topologies.termination import Candidate, normalize_artifact
from mas.tracing import Tracer, current_tracer

_synced: weakref.WeakSet[Tracer] = weakref.WeakSet()


def sync_step_counter(steps_done: int) -> None:
    """Number this run's next trajectory step from the checkpoint's ``steps_done``.

    Only the first node a tracer sees does this: in a run resumed from a
    checkpoint, that node redoes the steps from ``steps_done`` on, so the
    redone steps keep the indices they had in the original trace.
    """
    tracer = current_tracer()
    if tracer.enabled and tracer not in _synced:
        tracer.next_step = steps_done
        _synced.add(tracer)


def make_agents(rt: RunContext, role: str, prefix: str, n: int | None = None, *, tools: bool = True) -> list[AgentSpec]:
    """``n`` (default ``mas.agents``) agents ``<prefix>_0..`` in ``role``; personas round-robin from ``mas.personas``."""
    count = rt.cfg.mas.agents if n is None else n
    personas = rt.cfg.mas.personas
    return [AgentSpec(name=f"{prefix}_{i}", role=role, tools=tools,
                      persona=personas[i % len(personas)] if personas else None) for i in range(count)]


@dataclass(kw_only=True, slots=True)
class Artifact:
    """An agent's answer in one round, as kept in graph state (a plain dict there)."""

    agent: str
    round: int
    answer_artifact: str
    confidence: float
    reasoning: str = ""
    tool_results: list[str] = field(default_factory=list)
    """``tool(args) -> output`` lines of the tool calls this turn made."""

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "round": self.round, "answer_artifact": self.answer_artifact,
                "confidence": self.confidence, "reasoning": self.reasoning, "tool_results": self.tool_results}


def candidate(art: dict[str, Any]) -> Candidate:
    """The controller's view of a stored artifact dict."""
    return Candidate(agent=art["agent"], artifact=art["answer_artifact"], confidence=art["confidence"],
                     reasoning=art.get("reasoning", ""), evidence=len(art.get("tool_results") or []))


def packet(art: dict[str, Any]) -> str:
    """A stored artifact as a relay packet."""
    return relay_packet(art["agent"], art["answer_artifact"], art["confidence"], art.get("reasoning", ""))


def context_block(*, notes: Sequence[str] = (), packets_title: str = "", packets: Sequence[str] = (),
                  own: dict[str, Any] | None = None, own_label: str = "Your previous answer",
                  instruction: str = "") -> str:
    """The extra text an agent sees after the task (kept in one message so parsers find each part)."""
    parts = list(notes)
    if packets:
        parts.append(f"{packets_title}\n" + "\n".join(packets))
    if own is not None:
        if own.get("tool_results"):
            parts.append("Tool results you received earlier:\n" + "\n".join(f"- {t}" for t in own["tool_results"]))
        parts.append(f"{own_label}: {own['answer_artifact']}")
    if instruction:
        parts.append(instruction)
    return "\n\n".join(parts)


def event_for(previous: dict[str, Any] | None, first: EventType = "act") -> Callable[[Answer], EventType]:
    """``revise`` when the answer differs (normalised) from the agent's previous one, else ``first``."""

    def choose(ans: Answer) -> EventType:
        if previous is not None and normalize_artifact(ans.answer_artifact) != normalize_artifact(
                previous["answer_artifact"]):
            return "revise"
        return first

    return choose


@dataclass(kw_only=True, slots=True)
class TurnResult:
    answer: Answer | None
    """None when the turn ended in a routing tool call (``route_tools``)."""
    steps: int
    tool_results: list[str] = field(default_factory=list)
    routing_calls: list[ToolCallRequest] = field(default_factory=list)


async def turn(rt: RunContext, agent: AgentSpec, extra: str, *, choose_event: Callable[[Answer], EventType],
               sends: list[dict[str, str]] | None = None, state_id: str | None = None,
               payload: dict[str, Any] | None = None, contract: str = "agent.turn",
               route_tools: Sequence[Any] = (),
               on_route: Callable[[ToolCallRequest], dict[str, Any]] | None = None) -> TurnResult:
    """One turn: steps and tool calls until the agent answers (at most ``mas.max_tool_iterations`` tool rounds).

    A call to one of ``route_tools`` ends the turn (the caller routes);
    ``on_route(call)`` gives extra payload for that call's ``tool_call``
    event (its ``sends`` and ``handoff``).
    """
    history: list[BaseMessage] = opening_messages(rt, agent, extra)
    route_names = {t.name for t in route_tools}
    results: list[str] = []
    max_iter = rt.cfg.mas.max_tool_iterations
    for iteration in range(max_iter + 1):
        allow = iteration < max_iter and (agent.tools or bool(route_tools))
        tools = ([*(TOOLS if agent.tools else []), *route_tools]) if allow else None
        msgs = history if allow or not agent.tools else [*history, HumanMessage(force_answer_note())]
        # A call that fails for good raises LLMCallError: the run ends as an infrastructure error (no topology
        # carries on with a branch missing), see mas/sweep/runner.py.
        res = await call_llm(rt.models.for_role(agent.role), msgs, contract=contract, actor=agent.name,
                             step=current_tracer().next_step, tools=tools,
                             json_schema=None if tools else ANSWER_SCHEMA, metadata={"mas_role": agent.role})
        content = res.text or "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in res.tool_calls)
        common = {"role": agent.role, "content": content[:CONTENT_LIMIT], "persona": agent.persona, **(payload or {})}
        if res.tool_calls:
            routing = [c for c in res.tool_calls if c.name in route_names]
            _record_injection(rt, res, _emit_tool_calls(agent, res, common, on_route if routing else None, state_id))
            if routing:
                return TurnResult(answer=None, steps=iteration + 1, tool_results=results, routing_calls=routing)
            history.append(res.message if res.tool_calls[0].protocol == "native" else AIMessage(content=res.text))
            outs = await run_tool_calls(rt, agent, res.tool_calls, state_id)
            history += outs
            results += [f"{c.name}({json.dumps(c.arguments)}) -> {_message_text(m)[:300]}"
                        for c, m in zip(res.tool_calls, outs, strict=True)]
            continue
        answer = parse_answer(res.parsed, res.text)
        body = AgentOutput(**common, **answer.to_dict(), sends=sends)
        _record_injection(rt, res, current_tracer().emit(agent.name, choose_event(answer), body, state_id=state_id,
                                                         step=True, **llm_event_fields(res)))
        return TurnResult(answer=answer, steps=iteration + 1, tool_results=results)
    raise AssertionError("unreachable: the last iteration forbids tools")


def _record_injection(rt: RunContext, res: Any, event: Any) -> None:
    """Point the scripted injection record at the step index the injected output actually got.

    Parallel branches ask the model with the step counter of the moment, but
    their steps are numbered in emit order; the record must name the latter.
    """
    plan = rt.models.injection
    if (event is not None and plan is not None and plan.fired_at is not None
            and res.message.response_metadata.get("scripted_injected")):
        plan.fired_at["step"] = event.step_index


def _emit_tool_calls(agent: AgentSpec, res: Any, common: dict[str, Any],
                     on_route: Callable[[ToolCallRequest], dict[str, Any]] | None, state_id: str | None) -> Any:
    """Trace the calls (the first is the trajectory step); returns the first event."""
    first = None
    for i, call in enumerate(res.tool_calls):
        body = ToolCall(**common, tool=call.name, arguments=call.arguments, tool_call_id=call.id,
                        tool_protocol=call.protocol, **(on_route(call) if on_route is not None else {}))
        ev = current_tracer().emit(agent.name, "tool_call", body, state_id=state_id, step=i == 0,
                                   **(llm_event_fields(res) if i == 0 else {}))
        first = ev if i == 0 else first
    return first


def _message_text(m: BaseMessage) -> str:
    text = str(m.content)
    if isinstance(m, ToolMessage):
        return text
    # text protocol: "Tool <name> result:\n<output>\nContinue: ..."
    body = text.split("\n", 1)[1] if "\n" in text else text
    return body.rsplit("\nContinue:", 1)[0]


def artifact_of(agent: AgentSpec, round_index: int, result: TurnResult) -> dict[str, Any]:
    """The stored artifact dict of a finished turn (an empty artifact for one that ended without an answer)."""
    ans = result.answer
    if ans is None:
        return {"agent": agent.name, "round": round_index, "answer_artifact": "", "confidence": 0.0,
                "reasoning": "", "tool_results": result.tool_results, "error": "no answer"}
    return Artifact(agent=agent.name, round=round_index, answer_artifact=ans.answer_artifact,
                    confidence=ans.confidence, reasoning=ans.reasoning, tool_results=result.tool_results).to_dict()


def merge_dicts(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: per-key merge (parallel branches each write their own keys)."""
    return {**(a or {}), **(b or {})}


def merge_history(a: dict[str, list[Any]] | None, b: dict[str, list[Any]] | None) -> dict[str, list[Any]]:
    """Reducer: per-agent lists of artifacts, appended by round."""
    out = {k: list(v) for k, v in (a or {}).items()}
    for k, v in (b or {}).items():
        out.setdefault(k, []).extend(v)
    return out


def latest(history: dict[str, list[dict[str, Any]]], agent: str, before_round: int | None = None) -> dict[str, Any] | None:
    """An agent's most recent artifact (optionally from a round before ``before_round``)."""
    arts = [a for a in history.get(agent, []) if before_round is None or a["round"] < before_round]
    return arts[-1] if arts else None


def round_artifacts(history: dict[str, list[dict[str, Any]]], names: Sequence[str], round_index: int) -> list[dict[str, Any]]:
    """The artifacts of ``round_index`` in agent order (agents without one are left out)."""
    out = []
    for n in names:
        arts = [a for a in history.get(n, []) if a["round"] == round_index]
        if arts:
            out.append(arts[-1])
    return out
