"""``debate``: N debaters answer independently, then read each other and revise.

Round 0 is the independent answers; rounds 1..``mas.max_rounds`` are
discussion rounds. Every round fans out one ``debater`` task per agent
(LangGraph ``Send``); the ``controller`` decides after each round (no stop
on consensus or stalling before ``mas.minimum_discussion_rounds`` discussion
rounds); ``vote`` picks the final answer (LLM judge, else lexical vote).

Each debater's answer is published to its peers (``sends`` to every other
debater); a debater that changes its answer emits ``revise``. The
controller's decision is system-mediated: a further round goes to every
debater, a stop hands the debaters' last answers to ``system:judge``; the
judge's pick goes out to the ``user`` in its ``finalize`` event.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from mas.topologies.kit import (
    ANSWER_RECIPIENT,
    CONTROLLER,
    JUDGE_ACTOR,
    AgentGraph,
    AgentSpec,
    LoopState,
    MasSettings,
    Message,
    Participant,
    Role,
    RunContext,
    Topology,
    finish_loop,
    latest,
    make_agents,
    register_system,
    round_artifacts,
    round_decision,
    take_turn,
    tool_edges,
)

DEBATER_ROLE = Role(name="debater", brief="You are one of several independent debaters. Solve the task yourself.")
DISCUSS = ("These are the other agents' answers to the same task. Re-check the task and your own work; "
           "use a tool if a value needs checking. Keep your answer if it is right, change it if it is wrong.")


def debater_names(mas: MasSettings) -> list[str]:
    return [f"debater_{i}" for i in range(mas.agents)]


class DebateState(LoopState, total=False):
    round: int
    """Round in progress: 0 = independent answers, k >= 1 = discussion round k."""


def build_debate(rt: RunContext) -> StateGraph:
    """The debate graph of one run.

    On a benchmark solved by acting, each debater acts on its own environment branch (named after it), kept
    across rounds; the run's ``outcome`` is the final vote's winner's branch.
    """
    debaters = make_agents(rt, DEBATER_ROLE, debater_names(rt.cfg.mas))
    names = [d.name for d in debaters]
    graph = agent_graph(rt.cfg.mas)
    by_name = {d.name: d for d in debaters}

    async def fan_out(state: DebateState) -> list[Send]:
        r = state.get("round", 0)
        return [Send("debater", {"agent": n, "round": r, "history": state.get("history") or {},
                                 "notes": state.get("notes") or [], "steps_done": state.get("steps_done", 0),
                                 "envs": state.get("envs") or {}})
                for n in names]

    async def debater(task: dict[str, Any]) -> dict[str, Any]:
        agent: AgentSpec = by_name[task["agent"]]
        r, history = task["round"], task["history"]
        own = latest(history, agent.name, before_round=r)
        peers = [a for a in round_artifacts(history, names, r - 1) if a["agent"] != agent.name]
        return await take_turn(rt, agent, task, round_index=r, own=own, peers=peers,
                               peers_title="Other agents' answers:", instruction=DISCUSS if r > 0 else "",
                               sends=graph.sends(agent.name))

    async def controller(state: DebateState) -> dict[str, Any]:
        r = state.get("round", 0)
        history = state.get("history") or {}
        # the controller reads the round's answers from graph state (not a message); what it passes on is the
        # next round's start, or on a stop the answers to be voted on
        return await round_decision(rt, stage="debate", round_index=r, current=round_artifacts(history, names, r),
                                    previous=round_artifacts(history, names, r - 1) if r > 0 else None,
                                    expected_count=len(names),
                                    sends=lambda stop: graph.sends(CONTROLLER, "final vote" if stop else "next round"))

    async def after_controller(state: DebateState) -> list[Send] | str:
        return "vote" if state["decisions"][-1]["stop"] else await fan_out(state)

    async def vote(state: DebateState) -> dict[str, Any]:
        history = state.get("history") or {}
        arts = [a for a in (latest(history, n) for n in names) if a is not None]
        # the winner's branch is the outcome
        return await finish_loop(rt, state, stage="debate", vote=arts)

    g = StateGraph(DebateState)
    g.add_node("debater", debater)
    g.add_node("controller", controller)
    g.add_node("vote", vote)
    g.add_conditional_edges(START, fan_out, ["debater"])
    g.add_edge("debater", "controller")
    g.add_conditional_edges("controller", after_controller, ["debater", "vote"])
    g.add_edge("vote", END)
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """Every debater answers every other; the controller opens rounds and hands the answers to the judge."""
    debaters = debater_names(mas)
    messages = [Message(source=a, target=b, label="answer") for a in debaters for b in debaters if a != b]
    messages += [Message(source=CONTROLLER, target=a, label="next round", dashed=True) for a in debaters]
    messages += [Message(source=CONTROLLER, target=JUDGE_ACTOR, label="final vote", dashed=True),
                 Message(source=JUDGE_ACTOR, target=ANSWER_RECIPIENT, label="final answer", dashed=True)]
    return AgentGraph(
        participants=(*(Participant(name=d, role=DEBATER_ROLE.name, row=0) for d in debaters),
                      Participant(name="tools", row=1), Participant(name=CONTROLLER, row=1),
                      Participant(name=JUDGE_ACTOR, row=2), Participant(name=ANSWER_RECIPIENT, row=3)),
        messages=(*messages, *tool_edges(debaters)))


TOPOLOGY = register_system(Topology(name="debate", build=build_debate, roles=(DEBATER_ROLE,), agents=agent_graph,
                                    uses_judge=True,
                                    description="Debaters answer independently, then read each other and revise; "
                                                "a vote picks the final answer."))
