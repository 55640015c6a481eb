"""``round_robin``: the speakers answer in turn, each reading the others' latest answers; one controller decides
after each round whether another opens (with ``speaker_0``) or the last speaker's answer goes to the ``user``.

A topology is one module: node functions on a LangGraph ``StateGraph``, its agents and their messages
(``agent_graph``) and ``register_system``. The kit (:mod:`mas.topologies.kit`) keeps the books: each agent's
environment branch, the controller's decisions, the closing records, the checkpoint each event names, and who a
turn or a decision goes to (read from the agent graph).
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from mas.topologies.kit import (
    ANSWER_RECIPIENT, CONTROLLER, AgentGraph, LoopState, MasSettings, Message, Participant, Role, RunContext,
    Topology, finish_loop, latest, make_agents, register_system, round_artifacts, round_decision, take_turn, tool_edges,
)

SPEAKER = Role(name="speaker", brief="You are one of several speakers who answer the task in turn.")
TURN = ("These are the other speakers' latest answers to the same task. Re-check the task and your own work; "
        "keep your answer if it is right, change it if it is wrong.")


class RoundRobinState(LoopState, total=False):
    round: int
    turn: int  # the speaker whose turn is next in this round


def build(rt: RunContext) -> StateGraph:  # one node per turn: every turn is a checkpoint to roll back to
    graph = agent_graph(rt.cfg.mas)
    names = [p.name for p in graph.agents()]
    speakers = make_agents(rt, SPEAKER, names)

    async def speaker(state: RoundRobinState) -> dict:
        r, t, history = state.get("round", 0), state.get("turn", 0), state.get("history") or {}
        agent = speakers[t]
        others = [a for n in names if n != agent.name and (a := latest(history, n)) is not None]
        update = await take_turn(rt, agent, state, round_index=r, own=latest(history, agent.name), peers=others,
                                 peers_title="Other speakers' latest answers:", instruction=TURN if others else "",
                                 sends=graph.sends(agent.name))
        return {**update, "turn": t + 1}

    async def controller(state: RoundRobinState) -> dict:
        r, history = state.get("round", 0), state.get("history") or {}
        update = await round_decision(
            rt, stage="round_robin", round_index=r, current=round_artifacts(history, names, r),
            previous=round_artifacts(history, names, r - 1) if r > 0 else None, expected_count=len(names),
            sends=lambda stop: graph.sends(CONTROLLER, "final answer" if stop else "next round"))
        return {**update, "turn": 0}

    async def publish(state: RoundRobinState) -> dict:  # the last speaker with an answer has read everyone
        last = round_artifacts(state.get("history") or {}, names, state.get("round", 0))
        win = next((a for a in reversed(last) if a["answer_artifact"]), last[-1])
        return await finish_loop(rt, state, stage="round_robin", winner=win, selection="last_speaker",
                                 winner_agent=win["agent"])

    g = StateGraph(RoundRobinState).add_node(speaker).add_node(controller).add_node(publish)  # named as the functions
    g.add_edge(START, "speaker")
    g.add_conditional_edges("speaker", lambda s: "speaker" if s["turn"] < len(names) else "controller",
                            ["speaker", "controller"])
    g.add_conditional_edges("controller", lambda s: "publish" if s["decisions"][-1]["stop"] else "speaker",
                            ["speaker", "publish"])
    g.add_edge("publish", END)
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """Every speaker answers every other; the controller opens rounds and publishes the final answer."""
    s = [f"speaker_{i}" for i in range(mas.agents)]
    return AgentGraph(
        participants=(*(Participant(name=n, role=SPEAKER.name, row=0) for n in s), Participant(name="tools", row=1),
                      Participant(name=CONTROLLER, row=1), Participant(name=ANSWER_RECIPIENT, row=2)),
        messages=(*(Message(source=a, target=b, label="answer") for a in s for b in s if a != b),
                  Message(source=CONTROLLER, target=s[0], label="next round", dashed=True),
                  Message(source=CONTROLLER, target=ANSWER_RECIPIENT, label="final answer", dashed=True),
                  *tool_edges(s)))


TOPOLOGY = register_system(Topology(name="round_robin", build=build, roles=(SPEAKER,), agents=agent_graph, uses_judge=True,
                                    description="Speakers answer in turn, each reading the others' latest answers."))
