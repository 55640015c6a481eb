"""Agents, artifacts and context selection shared by the multi-agent topologies.

An agent sees only: the task, the relay packets selected for it, its own
previous artifact, the tool outputs it received, and any rollback notes.
Turns themselves are :func:`mas.topologies.agent.agent_turn`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from descriptor.events import EventType
from mas.topologies.agent import AgentSpec, Answer, RunContext, TurnResult
from mas.topologies.declaration import Role
from mas.topologies.prompts import relay_packet
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


def make_agents(rt: RunContext, role: Role, names: Sequence[str], *, tools: bool = True) -> list[AgentSpec]:
    """Agents called ``names`` in ``role``; personas round-robin from ``mas.personas``."""
    personas = rt.cfg.mas.personas
    return [role.agent(name, tools=tools, persona=personas[i % len(personas)] if personas else None)
            for i, name in enumerate(names)]


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


def artifact_of(agent: AgentSpec, round_index: int, result: TurnResult) -> dict[str, Any]:
    """The stored artifact dict of a finished turn (an empty artifact for one that ended without an answer)."""
    ans = result.answer
    if ans is None:
        return {"agent": agent.name, "round": round_index, "answer_artifact": "", "confidence": 0.0,
                "reasoning": "", "tool_results": result.tool_results, "error": "no answer"}
    return Artifact(agent=agent.name, round=round_index, answer_artifact=ans.answer_artifact,
                    confidence=ans.confidence, reasoning=ans.reasoning, tool_results=result.tool_results).to_dict()


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
