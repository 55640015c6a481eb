"""``round_robin``: the speakers answer in turn, each reading the others' latest answers; one controller.

A topology outside the project is this one module, importing the runtime from one place
(:mod:`mas.topologies.kit`): a graph builder, its roles and agent picture, and ``register_system`` (the
project's own topologies look the same, under ``mas/topologies/``). The kit does the bookkeeping: a turn on
the agent's own environment branch (``take_turn``), the controller's decision (``round_decision``), the
closing ``finalize`` event and stage record (``finish_loop``).

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

from mas.topologies.kit import (
    ANSWER_RECIPIENT,
    CONTROLLER,
    AgentGraph,
    LoopState,
    MasSettings,
    Message,
    Participant,
    Role,
    RunContext,
    Topology,
    context_block,
    finish_loop,
    latest,
    make_agents,
    packet,
    register_system,
    round_artifacts,
    round_decision,
    state_id_of,
    take_turn,
    tool_edges,
)

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
        r, t = state.get("round", 0), state.get("turn", 0)
        agent = speakers[t]
        history = state.get("history") or {}
        own = latest(history, agent.name)
        others = [a for n in names if n != agent.name and (a := latest(history, n)) is not None]
        extra = context_block(notes=state.get("notes") or [], packets_title="Other speakers' latest answers:",
                              packets=[packet(a) for a in others], own=own, instruction=TURN if others else "")
        update = await take_turn(rt, agent, state, round_index=r, extra=extra, own=own, peers=others,
                                 state_id=state_id_of(config),
                                 sends=[{"from": agent.name, "to": n} for n in names if n != agent.name])
        return {**update, "turn": t + 1}

    async def after_speaker(state: RoundRobinState) -> str:
        return "speaker" if state.get("turn", 0) < len(names) else "controller"

    async def controller(state: RoundRobinState, config: RunnableConfig) -> dict[str, Any]:
        r = state.get("round", 0)
        history = state.get("history") or {}
        update = await round_decision(
            rt, stage=STAGE, round_index=r, current=round_artifacts(history, names, r),
            previous=round_artifacts(history, names, r - 1) if r > 0 else None, expected_count=len(names),
            state_id=state_id_of(config), sends=lambda stop: [{"from": CONTROLLER,
                                                               "to": ANSWER_RECIPIENT if stop else names[0]}])
        return {**update, "turn": 0}

    async def after_controller(state: RoundRobinState) -> str:
        return "publish" if state["decisions"][-1]["stop"] else "speaker"

    async def publish(state: RoundRobinState, config: RunnableConfig) -> dict[str, Any]:
        """The last speaker with an answer (it has read everyone) speaks for the system."""
        last_round = round_artifacts(state.get("history") or {}, names, state.get("round", 0))
        win = next((a for a in reversed(last_round) if a["answer_artifact"]), last_round[-1])
        return await finish_loop(rt, state, stage=STAGE, winner=win, selection="last_speaker",
                                 winner_agent=win["agent"], state_id=state_id_of(config))

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
                                    agents=agent_graph, uses_judge=True,
                                    description="Speakers answer in turn, each reading the others' latest answers."))
