"""``round_robin``: the speakers answer in turn, each reading the others' latest answers; one controller.

A topology outside the project is this one module: a graph builder, its roles and agent picture, and
``register_system`` (the project's own topologies look the same, under ``mas/topologies/``).

Round ``r``: ``speaker_0``, ``speaker_1``, ... take one turn each, in order; each sees every other speaker's
latest answer (this round's earlier speakers, the previous round's later ones) and publishes its own to them
(``sends``). After the last speaker the termination controller decides (consensus, no progress, a failed
branch, the round budget ``mas.max_rounds``); a further round opens with ``speaker_0``, a stop publishes the
last speaker's answer (the one that has read everyone) to the ``user``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from descriptor.events import FinalAnswer
from mas.config import MasSettings
from mas.topologies.agent import RunContext, agent_turn, opening_messages, state_id_of
from mas.topologies.declaration import AgentGraph, Message, Participant, Role, Topology, register_system, tool_edges
from mas.topologies.environment import log_update
from mas.topologies.judge import ANSWER_RECIPIENT, consensus_judge
from mas.topologies.roles import (
    artifact_of,
    candidate,
    context_block,
    event_for,
    latest,
    make_agents,
    packet,
    round_artifacts,
    sync_step_counter,
)
from mas.topologies.state import LoopState
from mas.topologies.termination import CONTROLLER, LoopPosition, decide, emit_decision
from mas.tracing import current_tracer

STAGE = "round_robin"
SPEAKER_ROLE = Role(name="speaker", brief="You are one of several speakers who answer the task in turn.")
TURN = ("These are the other speakers' latest answers to the same task. Re-check the task and your own work; "
        "keep your answer if it is right, change it if it is wrong.")


def speaker_names(mas: MasSettings) -> list[str]:
    return [f"speaker_{i}" for i in range(mas.agents)]


class RoundRobinState(LoopState, total=False):
    round: int
    """Round in progress (0 first)."""
    turn: int
    """Index of the speaker whose turn is next in this round."""


def build_round_robin(rt: RunContext) -> StateGraph:
    """The round-robin graph of one run (one node per turn, so every turn is a checkpoint to roll back to)."""
    speakers = make_agents(rt, SPEAKER_ROLE, speaker_names(rt.cfg.mas))
    names = [s.name for s in speakers]

    async def speaker(state: RoundRobinState, config: RunnableConfig) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        r, t = state.get("round", 0), state.get("turn", 0)
        agent = speakers[t]
        history = state.get("history") or {}
        own = latest(history, agent.name)
        others = [a for n in names if n != agent.name and (a := latest(history, n)) is not None]
        extra = context_block(notes=state.get("notes") or [], packets_title="Other speakers' latest answers:",
                              packets=[packet(a) for a in others], own=own, instruction=TURN if others else "")
        env = rt.environment(state.get("envs"), agent.name)
        tools = rt.toolbox(env)
        res = await agent_turn(rt, agent, opening_messages(rt, agent, extra, tools), answer_event=event_for(own),
                               sends=[{"from": agent.name, "to": n} for n in names if n != agent.name],
                               state_id=state_id_of(config), payload={"round": r}, toolbox=tools)
        return {"history": {agent.name: [artifact_of(agent, r, res, env)]}, "steps_done": res.steps,
                "turn": t + 1, **log_update(agent.name, env)}

    async def after_speaker(state: RoundRobinState) -> str:
        return "speaker" if state.get("turn", 0) < len(names) else "controller"

    async def controller(state: RoundRobinState, config: RunnableConfig) -> dict[str, Any]:
        r = state.get("round", 0)
        history = state.get("history") or {}
        current = [candidate(a) for a in round_artifacts(history, names, r)]
        previous = [candidate(a) for a in round_artifacts(history, names, r - 1)] if r > 0 else None
        d = await decide(LoopPosition(stage=STAGE, round=r, max_rounds=rt.cfg.mas.max_rounds,
                                      min_rounds=rt.cfg.mas.minimum_discussion_rounds),
                         candidate_artifacts=current, previous_candidate_artifacts=previous,
                         expected_count=len(names), mode=rt.cfg.mas.termination_consensus_mode,
                         judge=consensus_judge(rt))
        to = ANSWER_RECIPIENT if d.stop else names[0]
        emit_decision(d, state_id=state_id_of(config), sends=[{"from": CONTROLLER, "to": to}])
        return {"decisions": [d.model_dump()], "round": r if d.stop else r + 1, "turn": 0}

    async def after_controller(state: RoundRobinState) -> str:
        return "publish" if state["decisions"][-1]["stop"] else "speaker"

    async def publish(state: RoundRobinState, config: RunnableConfig) -> dict[str, Any]:
        history = state.get("history") or {}
        last_round = round_artifacts(history, names, state.get("round", 0))
        win = next((a for a in reversed(last_round) if a["answer_artifact"]), last_round[-1])
        answer = {"answer_artifact": win["answer_artifact"], "confidence": win["confidence"],
                  "reasoning": win.get("reasoning", ""), "source_agent": win["agent"], "selection": "last_speaker"}
        outcome = win["agent"] if rt.new_environment else None
        current_tracer().emit(CONTROLLER, "finalize", FinalAnswer(
            **answer, content=win["answer_artifact"], outcome_environment=outcome,
            sends=[{"from": CONTROLLER, "to": ANSWER_RECIPIENT}]), state_id=state_id_of(config))
        last = state["decisions"][-1]
        stage = {"stage": STAGE, "rounds_used": last["round"], "max_rounds": rt.cfg.mas.max_rounds,
                 "stop_reason": last["reason"], "reason_detail": last["reason_detail"],
                 "consensus_ratio": last["consensus_ratio"], "consensus_source": last["consensus_source"],
                 "decisions": len(state["decisions"]), "winner_agent": win["agent"]}
        return {"answer": answer, "stages": [stage], **({"outcome": outcome} if outcome else {})}

    g = StateGraph(RoundRobinState)
    g.add_node("speaker", speaker)
    g.add_node("controller", controller)
    g.add_node("publish", publish)
    g.add_edge(START, "speaker")
    g.add_conditional_edges("speaker", after_speaker, ["speaker", "controller"])
    g.add_conditional_edges("controller", after_controller, ["speaker", "publish"])
    g.add_edge("publish", END)
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """Every speaker answers every other; the controller opens rounds and publishes the final answer."""
    speakers = speaker_names(mas)
    messages = [Message(source=a, target=b, label="answer") for a in speakers for b in speakers if a != b]
    messages += [Message(source=CONTROLLER, target=speakers[0], label="next round", dashed=True),
                 Message(source=CONTROLLER, target=ANSWER_RECIPIENT, label="final answer", dashed=True)]
    return AgentGraph(
        participants=(*(Participant(name=s, role=SPEAKER_ROLE.name, row=0) for s in speakers),
                      Participant(name="tools", row=1), Participant(name=CONTROLLER, row=1),
                      Participant(name=ANSWER_RECIPIENT, row=2)),
        messages=(*messages, *tool_edges(speakers)))


TOPOLOGY = register_system(Topology(name=STAGE, build=build_round_robin, roles=(SPEAKER_ROLE,),
                                    agents=agent_graph, uses_judge=True))
