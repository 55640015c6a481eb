"""Agents, artifacts and context selection shared by the multi-agent topologies.

An agent sees only: the task, the relay packets selected for it, its own
previous artifact, the tool outputs it received, and any rollback notes.
Turns themselves are :func:`mas.topologies.agent.agent_turn`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.environment import Environment
from descriptor.events import EventType, FinalAnswer, FinalVote
from mas.topologies.agent import AgentSpec, Answer, RunContext, TurnResult
from mas.topologies.declaration import Role
from mas.topologies.environment import changes_text
from mas.topologies.judge import ANSWER_RECIPIENT, JUDGE_ACTOR, VoteOutcome, final_vote
from mas.topologies.node import state_id_of
from mas.topologies.prompts import relay_packet
from mas.topologies.termination import MISSING_CONFIDENCE, Candidate, lexical_groups, normalize_artifact
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
    """Agents called ``names`` in ``role``: with the run's generated personas, else round-robin from ``mas.personas``."""
    if rt.personas is not None:
        return [rt.specialise(role.agent(name, tools=tools)) for name in names]
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
    """The controller's (and the vote's) view of a stored artifact dict.

    On a benchmark solved by acting the artifact is the answer and the
    changes the agent's environment holds (``changes: ...``): agents agree
    when they say and did the same. An empty answer stays empty (invalid).
    """
    text = art["answer_artifact"]
    if text and art.get("changes") is not None:
        text = f"{text}\nchanges: {art['changes']}"
    return Candidate(agent=art["agent"], artifact=text, confidence=art["confidence"],
                     reasoning=art.get("reasoning", ""), evidence=len(art.get("tool_results") or []))


def packet(art: dict[str, Any]) -> str:
    """A stored artifact as a relay packet (with the changes the agent made, on an environment, and its subtask)."""
    text = relay_packet(art["agent"], art["answer_artifact"], art["confidence"], art.get("reasoning", ""))
    if art.get("changes") is not None:
        text += f"\n  changes: {art['changes']}"
    return text + (f"\n  subtask: {art['subtask']}" if art.get("subtask") else "")


def discussion_hints(own: dict[str, Any] | None, peers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The agent's previous answer and the peers' answers (and changes, on an environment) it is shown, as call
    hints (``agent_turn(hints=...)``): what a test double reads instead of the packets' text."""
    def view(art: dict[str, Any]) -> dict[str, Any]:
        return {"agent": art["agent"], "answer": str(art["answer_artifact"]).strip(), "changes": art.get("changes")}

    return {"own": None if own is None else view(own), "peers": [view(a) for a in peers]}


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
        if own.get("changes") is not None:
            parts.append(f"Your changes so far: {own['changes']}")
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


def artifact_of(agent: AgentSpec, round_index: int, result: TurnResult, environment: Environment | None = None,
                since: int = 0) -> dict[str, Any]:
    """The stored artifact dict of a finished turn (an empty artifact for one that ended without an answer).

    ``environment``: the agent's environment after the turn; its state
    changes (from action ``since`` on) are kept as ``changes`` (see :func:`candidate`).
    """
    ans = result.answer
    if ans is None:
        out = {"agent": agent.name, "round": round_index, "answer_artifact": "", "confidence": MISSING_CONFIDENCE,
               "reasoning": "", "tool_results": result.tool_results, "error": "no answer"}
    else:
        out = Artifact(agent=agent.name, round=round_index, answer_artifact=ans.answer_artifact,
                       confidence=ans.confidence, reasoning=ans.reasoning, tool_results=result.tool_results).to_dict()
    if environment is not None:
        out["changes"] = changes_text(environment, since)
    return out


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


async def vote_among(rt: RunContext, arts: Sequence[dict[str, Any]], *, state_id: str | None = None,
                     sends: list[dict[str, str]] | None = None, notes: Sequence[str] = (),
                     as_step: bool = False) -> tuple[dict[str, Any], VoteOutcome]:
    """The final vote (``mas.final_vote_mode``) among stored artifacts, traced as ``system:judge``'s ``verify``.

    Returns the winning artifact and the vote. ``arts`` must not be empty. ``notes``: what the judge is told
    besides the task (a rollback's note). With ``as_step``, a vote a judge model cast is a trajectory step (see
    :func:`publish_vote`).
    """
    cands = [candidate(a) for a in arts]
    out = await final_vote(rt, cands, notes=notes)
    win = arts[out.winner_index]
    current_tracer().emit(JUDGE_ACTOR, "verify", FinalVote(
        vote_source=out.source, winner_index=out.winner_index, winner_agent=win["agent"],
        groups=[[cands[i].agent for i in g] for g in out.groups], invalid_indices=out.invalid_indices,
        explanation=out.explanation, judge_error=out.error, sends=sends, candidates=[c.agent for c in cands],
        answer_groups=lexical_groups(cands), shown_order=out.shown_order,
    ), state_id=state_id_of() if state_id is None else state_id, step=as_step and out.by_model,
        **out.envelope())
    return win, out


@dataclass(kw_only=True, slots=True)
class Published:
    """The run's answer as the final vote published it."""

    answer: dict[str, Any]
    """The graph's ``answer`` state: artifact, confidence, reasoning, source agent, selection."""
    winner: dict[str, Any]
    vote: VoteOutcome
    outcome: str | None
    """The winner's environment branch, on a benchmark solved by acting (the run's outcome); None otherwise."""

    def update(self) -> dict[str, Any]:
        """The graph-state update: the answer, the outcome branch where there is one, and the vote's step."""
        return {"answer": self.answer, **({"outcome": self.outcome} if self.outcome else {}),
                **({"steps_done": 1} if self.vote.by_model else {})}


async def publish_vote(rt: RunContext, arts: Sequence[dict[str, Any]], *, state: Mapping[str, Any],
                       state_id: str | None = None) -> Published:
    """The final vote among ``arts`` (:func:`vote_among`), then ``system:judge``'s ``finalize`` event giving the
    winner's answer to the user: the closing records every voting topology writes.

    A vote a judge model cast is a trajectory step of ``system:judge``: it is a model's output that can be wrong
    while a candidate was right, and a rollback from its checkpoint redoes the vote alone, told the rollback's
    note (``state``'s ``notes``) and numbered from ``state``'s ``steps_done``. A lexical vote is not: it is a
    function of the steps before it, and redoing it changes nothing.
    """
    sync_step_counter(state.get("steps_done", 0))  # a rollback may resume at the vote
    state_id = state_id_of() if state_id is None else state_id
    win, out = await vote_among(rt, arts, state_id=state_id, notes=state.get("notes") or (), as_step=True)
    answer = {"answer_artifact": win["answer_artifact"], "confidence": win["confidence"],
              "reasoning": win.get("reasoning", ""), "source_agent": win["agent"], "selection": out.source}
    outcome = win["agent"] if rt.new_environment else None
    current_tracer().emit(JUDGE_ACTOR, "finalize", FinalAnswer(
        **answer, content=win["answer_artifact"], outcome_environment=outcome,
        sends=[{"from": JUDGE_ACTOR, "to": ANSWER_RECIPIENT}]), state_id=state_id)
    # the runner judges every candidate too, for the vote audit (mas.sweep.runner.candidate_verdicts)
    answer["candidates"] = [a["answer_artifact"] for a in arts]
    return Published(answer=answer, winner=win, vote=out, outcome=outcome)
