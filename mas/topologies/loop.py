"""A looped stage's bookkeeping as code: one agent's turn, the controller's round decision, the closing records.

Every looped topology (debate, representative exchange, supervisor, orchestrator, a plugin's) did these three
by hand: number the node's steps from the checkpoint (:func:`~mas.topologies.roles.sync_step_counter`), run a
turn on the agent's own environment branch and store its artifact; ask the termination controller after a
round; and, on a stop, publish the answer (a ``finalize`` event to the ``user``) and write the stage record
the run's metrics keep (``trace_metrics.json``'s ``stages``). The functions here are those three, so a new
topology writes only what is its own: who speaks when and what each one reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from descriptor.events import FinalAnswer
from mas.topologies.agent import AgentSpec, RunContext, agent_turn, opening_messages
from mas.topologies.environment import log_update
from mas.topologies.judge import ANSWER_RECIPIENT, consensus_judge
from mas.topologies.node import state_id_of
from mas.topologies.roles import (
    artifact_of,
    candidate,
    context_block,
    discussion_hints,
    event_for,
    packet,
    publish_vote,
    sync_step_counter,
)
from mas.topologies.termination import CONTROLLER, LoopPosition, decide, emit_decision
from mas.tracing import current_tracer


@dataclass(kw_only=True, slots=True, frozen=True)
class StageRecord:
    """One looped stage as the run's metrics keep it (``trace_metrics.json``'s ``stages``, a plain dict there)."""

    stage: str
    rounds_used: int
    """The round (or cycle) of the closing decision."""
    max_rounds: int
    stop_reason: str | None
    reason_detail: str | None
    consensus_ratio: float | None
    consensus_source: str | None
    decisions: int
    """Controller decisions the stage took."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """The topology's own fields (a vote's source, the winner, delegations, the outcome environment, ...)."""

    @classmethod
    def closing(cls, stage: str, decisions: Sequence[Mapping[str, Any]], max_rounds: int,
                **extra: Any) -> StageRecord:
        """The record of a stage that stopped with the last of ``decisions`` (graph state's ``decisions``).

        >>> d = {"round": 2, "reason": "consensus_reached", "reason_detail": "3/3", "consensus_ratio": 1.0,
        ...      "consensus_source": "lexical"}
        >>> StageRecord.closing("debate", [d, d], 3, winner_agent="debater_0").to_dict()["decisions"]
        2
        """
        last = decisions[-1]
        return cls(stage=stage, rounds_used=last["round"], max_rounds=max_rounds, stop_reason=last["reason"],
                   reason_detail=last["reason_detail"], consensus_ratio=last["consensus_ratio"],
                   consensus_source=last["consensus_source"], decisions=len(decisions),
                   extra={k: v for k, v in extra.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "rounds_used": self.rounds_used, "max_rounds": self.max_rounds,
                "stop_reason": self.stop_reason, "reason_detail": self.reason_detail,
                "consensus_ratio": self.consensus_ratio, "consensus_source": self.consensus_source,
                "decisions": self.decisions, **self.extra}


async def take_turn(rt: RunContext, agent: AgentSpec, task: Mapping[str, Any], *, round_index: int,
                    sends: list[dict[str, str]], extra: str | None = None, own: dict[str, Any] | None = None,
                    peers: Sequence[dict[str, Any]] | None = None, peers_title: str = "", instruction: str = "",
                    payload: dict[str, Any] | None = None, state_id: str | None = None) -> dict[str, Any]:
    """One agent's turn in a looped stage, on its own environment branch; returns the graph-state update.

    ``task`` is the node's state (or ``Send`` payload): its ``steps_done`` numbers the turn's steps on a resumed
    run, its ``envs`` hold the agent's branch (named after it, kept across rounds) and its ``notes`` (a
    rollback's) open what the agent is shown after the task. Then ``peers``, the other agents' artifacts under
    ``peers_title``, ``own``, the agent's previous artifact (a changed answer is then a ``revise``), and
    ``instruction`` (:func:`~mas.topologies.roles.context_block`); ``extra`` replaces all of that with a text
    of the caller's. ``own`` and ``peers`` also travel as the call's hints
    (:func:`~mas.topologies.roles.discussion_hints`). ``payload``: the events' extra fields (default
    ``{"round": round_index}``). The update stores the turn's artifact under the agent's history, adds its steps
    and keeps its branch's action log.
    """
    if extra is None:
        extra = context_block(notes=task.get("notes") or [], packets_title=peers_title,
                              packets=[packet(a) for a in peers or []], own=own, instruction=instruction)
    sync_step_counter(task.get("steps_done", 0))
    env = rt.environment(task.get("envs"), agent.name)
    tools = rt.toolbox(env)
    res = await agent_turn(rt, agent, opening_messages(rt, agent, extra, tools), answer_event=event_for(own),
                           sends=sends, state_id=state_id, toolbox=tools,
                           payload={"round": round_index} if payload is None else payload,
                           hints=discussion_hints(own, peers or []) if own is not None or peers else None)
    # a turn without an answer leaves an empty artifact, which the controller counts as an invalid branch
    return {"history": {agent.name: [artifact_of(agent, round_index, res, env)]}, "steps_done": res.steps,
            **log_update(agent.name, env)}


async def round_decision(rt: RunContext, *, stage: str, round_index: int, current: Sequence[dict[str, Any]],
                         previous: Sequence[dict[str, Any]] | None, expected_count: int,
                         sends: Callable[[bool], list[dict[str, str]] | None], state_id: str | None = None,
                         ) -> dict[str, Any]:
    """The termination controller's decision after round ``round_index`` (stored artifacts of this round and the
    one before), traced with ``sends(stop)`` as its recipients; returns ``{"decisions", "round"}`` (the round
    advances unless the loop stops). Budget ``mas.max_rounds``, at least ``mas.minimum_discussion_rounds``."""
    mas = rt.cfg.mas
    d = await decide(LoopPosition(stage=stage, round=round_index, max_rounds=mas.max_rounds,
                                  min_rounds=mas.minimum_discussion_rounds),
                     candidate_artifacts=[candidate(a) for a in current],
                     previous_candidate_artifacts=None if previous is None else [candidate(a) for a in previous],
                     expected_count=expected_count, mode=mas.termination_consensus_mode, judge=consensus_judge(rt))
    emit_decision(d, state_id=state_id, sends=sends(d.stop))
    return {"decisions": [d.model_dump()], "round": round_index if d.stop else round_index + 1}


_UNSET: Any = object()


async def finish_loop(rt: RunContext, state: Mapping[str, Any], *, stage: str, state_id: str | None = None,
                      max_rounds: int | None = None, vote: Sequence[dict[str, Any]] | None = None,
                      winner: dict[str, Any] | None = None, selection: str = "", announcer: str = CONTROLLER,
                      outcome: str | None = _UNSET, finalize: Mapping[str, Any] | None = None,
                      **extra: Any) -> dict[str, Any]:
    """Close a looped stage: publish the run's answer and write the stage record; returns the graph-state update
    (``answer``, ``stages`` and, on a benchmark solved by acting, ``outcome``).

    Either ``vote``: the final vote among these stored artifacts, which ``system:judge`` publishes
    (:func:`~mas.topologies.roles.publish_vote`; the record gets the vote's source and winner); or ``winner``:
    the artifact the topology chose itself (``selection`` says how), published by ``announcer`` with the
    ``finalize`` fields in ``finalize``; an empty artifact is then no answer. ``outcome``: the environment
    branch that is the run's outcome (default: the winner's, on a benchmark solved by acting). ``extra``: the
    topology's own stage fields. ``max_rounds`` defaults to ``mas.max_rounds``. The stage's controller decisions
    (``state["decisions"]``, from :func:`round_decision`) must not be empty: the record is its closing one.
    """
    sync_step_counter(state.get("steps_done", 0))
    state_id = state_id_of() if state_id is None else state_id
    if not state.get("decisions"):  # a topology's bug, which would otherwise surface as an IndexError
        raise RuntimeError(f"finish_loop(stage={stage!r}): the stage took no controller decision; a looped stage "
                           "calls round_decision after each round and closes on its stop")
    rounds = rt.cfg.mas.max_rounds if max_rounds is None else max_rounds
    if vote is not None:
        pub = await publish_vote(rt, vote, state=state, state_id=state_id)
        record = StageRecord.closing(stage, state["decisions"], rounds, **extra, final_vote_source=pub.vote.source,
                                     winner_agent=pub.winner["agent"], outcome_environment=pub.outcome)
        return {**pub.update(), "stages": [record.to_dict()]}
    assert winner is not None, "finish_loop needs a vote or a winner"
    if outcome is _UNSET:
        outcome = winner["agent"] if rt.new_environment else None
    answer = {"answer_artifact": winner["answer_artifact"], "confidence": winner["confidence"],
              "reasoning": winner.get("reasoning", ""), "source_agent": winner["agent"], "selection": selection}
    current_tracer().emit(announcer, "finalize", FinalAnswer(
        **answer, content=winner["answer_artifact"], **dict(finalize or {}), outcome_environment=outcome,
        sends=[{"from": announcer, "to": ANSWER_RECIPIENT}]), state_id=state_id)
    record = StageRecord.closing(stage, state["decisions"], rounds, **extra, outcome_environment=outcome)
    return {"answer": answer if winner["answer_artifact"] else None, "stages": [record.to_dict()],
            **({"outcome": outcome} if outcome else {})}
