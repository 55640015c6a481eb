"""``orchestrator``: planner -> parallel workers (``Send`` fan-out) -> critic -> aggregator, in cycles.

One cycle plans, lets ``mas.agents`` workers solve the task along the plan
in parallel, has the critic check their answers and the aggregator write
the cycle's answer. The ``controller`` decides between cycles (on the
workers' answers); ``mas.rounds`` bounds the cycles, and ``rounds = 1``
runs exactly one. The aggregator's answer goes to the controller; when the
controller stops, ``finalize`` publishes the last aggregate to the ``user``.
For a further cycle the controller relays the critique and the aggregate to
the planner, and each worker sees its own previous answer.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from mas.config import MasSettings
from mas.topologies.agent import RunContext, agent_turn, opening_messages, state_id_of
from mas.topologies.declaration import AgentGraph, Message, Participant, Role, Topology, tool_edges
from mas.topologies.judge import ANSWER_RECIPIENT, consensus_judge
from mas.topologies.roles import (
    artifact_of,
    candidate,
    context_block,
    event_for,
    latest,
    make_agents,
    merge_history,
    packet,
    round_artifacts,
    sync_step_counter,
)
from mas.topologies.termination import CONTROLLER, LoopPosition, decide, emit_decision
from descriptor.events import FinalAnswer
from mas.tracing import current_tracer

PLANNER_ROLE = Role(name="planner", brief="You are the planner. Break the task into a few short, concrete sub-tasks.")
WORKER_ROLE = Role(name="worker", brief="You are a specialist worker. Solve the sub-task you are given; be concise.")
CRITIC_ROLE = Role(name="critic",
                   brief="You are the critic. Check the workers' answers against the task and point out errors.")
AGGREGATOR_ROLE = Role(name="aggregator", brief="You are the aggregator. Produce the single final answer from the "
                                                "workers' results and the critique.")
PLANNER = PLANNER_ROLE.agent("planner", tools=False)
CRITIC = CRITIC_ROLE.agent("critic")
AGGREGATOR = AGGREGATOR_ROLE.agent("aggregator")


def worker_names(mas: MasSettings) -> list[str]:
    return [f"worker_{i}" for i in range(mas.agents)]


class OrchestratorState(TypedDict, total=False):
    cycle: int
    """Cycle in progress (0-based)."""
    history: Annotated[dict[str, list[dict[str, Any]]], merge_history]
    """Per agent (planner, workers, critic, aggregator): its artifact of every cycle."""
    decisions: Annotated[list[dict[str, Any]], operator.add]
    steps_done: Annotated[int, operator.add]
    notes: Annotated[list[str], operator.add]
    answer: dict[str, Any] | None
    stages: list[dict[str, Any]]


def build_orchestrator(rt: RunContext) -> StateGraph:
    """The orchestrator graph of one run."""
    workers = make_agents(rt, WORKER_ROLE, worker_names(rt.cfg.mas))
    names = [w.name for w in workers]
    by_name = {w.name: w for w in workers}

    async def planner(state: OrchestratorState, config: RunnableConfig) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        c, history = state.get("cycle", 0), state.get("history") or {}
        own = latest(history, PLANNER.name)
        relayed = [packet(a) for a in (latest(history, CRITIC.name), latest(history, AGGREGATOR.name)) if a]
        instruction = (f"Write a short numbered plan for the {len(names)} workers; each solves the whole task "
                       "along it. Put the plan in answer_artifact.")
        extra = context_block(notes=state.get("notes") or [], packets_title="Last cycle's critique and answer:",
                              packets=relayed, own=own, own_label="Your previous plan", instruction=instruction)
        res = await agent_turn(rt, PLANNER, opening_messages(rt, PLANNER, extra), answer_event=event_for(own, "plan"),
                         sends=[{"from": PLANNER.name, "to": n} for n in names], state_id=state_id_of(config),
                         payload={"cycle": c})
        return {"history": {PLANNER.name: [artifact_of(PLANNER, c, res)]}, "steps_done": res.steps}

    async def fan_out(state: OrchestratorState) -> list[Send]:
        c, history = state.get("cycle", 0), state.get("history") or {}
        plan = latest(history, PLANNER.name)
        return [Send("worker", {"agent": n, "cycle": c, "plan": plan["answer_artifact"] if plan else "",
                                "own": latest(history, n), "notes": state.get("notes") or [],
                                "steps_done": state.get("steps_done", 0)}) for n in names]

    async def worker(task: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        sync_step_counter(task["steps_done"])
        agent, c, own = by_name[task["agent"]], task["cycle"], task["own"]
        i = names.index(agent.name)
        extra = context_block(notes=task["notes"], packets_title="The planner's plan:", packets=[task["plan"]],
                              own=own, instruction=f"You are worker {i + 1} of {len(names)}. Follow the plan, pay "
                              f"special attention to step {i + 1}, and give the final answer to the whole task.")
        res = await agent_turn(rt, agent, opening_messages(rt, agent, extra), answer_event=event_for(own),
                         sends=[{"from": agent.name, "to": CRITIC.name}, {"from": agent.name, "to": AGGREGATOR.name}],
                         state_id=state_id_of(config), payload={"cycle": c})
        return {"history": {agent.name: [artifact_of(agent, c, res)]}, "steps_done": res.steps}

    async def critic(state: OrchestratorState, config: RunnableConfig) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        c, history = state.get("cycle", 0), state.get("history") or {}
        answers = [packet(a) for a in round_artifacts(history, names, c)]
        extra = context_block(notes=state.get("notes") or [], packets_title="The workers' answers:", packets=answers,
                              instruction="Check the workers' answers against the task (use a tool to check values). "
                                          "Put the answer you find correct in answer_artifact and the errors you "
                                          "found in reasoning.")
        res = await agent_turn(rt, CRITIC, opening_messages(rt, CRITIC, extra), answer_event="verify",
                         sends=[{"from": CRITIC.name, "to": AGGREGATOR.name}], state_id=state_id_of(config),
                         payload={"cycle": c})
        return {"history": {CRITIC.name: [artifact_of(CRITIC, c, res)]}, "steps_done": res.steps}

    async def aggregator(state: OrchestratorState, config: RunnableConfig) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        c, history = state.get("cycle", 0), state.get("history") or {}
        own = latest(history, AGGREGATOR.name)
        inputs = [packet(a) for a in round_artifacts(history, [*names, CRITIC.name], c)]
        extra = context_block(notes=state.get("notes") or [], packets_title="The workers' answers and the critique:",
                              packets=inputs, instruction="Write the single final answer to the task.")
        # the cycle's answer goes to the controller, which relays it to the planner or publishes it
        res = await agent_turn(rt, AGGREGATOR, opening_messages(rt, AGGREGATOR, extra), answer_event=event_for(own),
                         sends=[{"from": AGGREGATOR.name, "to": CONTROLLER}], state_id=state_id_of(config),
                         payload={"cycle": c})
        return {"history": {AGGREGATOR.name: [artifact_of(AGGREGATOR, c, res)]}, "steps_done": res.steps}

    async def controller(state: OrchestratorState, config: RunnableConfig) -> dict[str, Any]:
        c, history = state.get("cycle", 0), state.get("history") or {}
        current = [candidate(a) for a in round_artifacts(history, names, c)]
        previous = [candidate(a) for a in round_artifacts(history, names, c - 1)] if c > 0 else None
        d = await decide(LoopPosition(stage="orchestrator", round=c + 1, max_rounds=rt.cfg.mas.rounds),
                         candidate_artifacts=current, previous_candidate_artifacts=previous,
                         expected_count=len(names), mode=rt.cfg.mas.termination_consensus_mode,
                         judge=consensus_judge(rt))
        # continuing relays the critique and the aggregate to the planner (and each worker its own answer)
        sends = None if d.stop else [{"from": CONTROLLER, "to": a} for a in (PLANNER.name, *names)]
        emit_decision(d, state_id=state_id_of(config), sends=sends)
        return {"decisions": [d.payload()], "cycle": c if d.stop else c + 1}

    async def after_controller(state: OrchestratorState) -> str:
        return "finalize" if state["decisions"][-1]["stop"] else "planner"

    async def finalize(state: OrchestratorState, config: RunnableConfig) -> dict[str, Any]:
        agg = latest(state.get("history") or {}, AGGREGATOR.name)
        assert agg is not None
        answer = {"answer_artifact": agg["answer_artifact"], "confidence": agg["confidence"],
                  "reasoning": agg.get("reasoning", ""), "source_agent": AGGREGATOR.name, "selection": "aggregator"}
        current_tracer().emit(CONTROLLER, "finalize", FinalAnswer(
            **answer, content=agg["answer_artifact"], cycle=state.get("cycle", 0),
            sends=[{"from": CONTROLLER, "to": ANSWER_RECIPIENT}]), state_id=state_id_of(config))
        last = state["decisions"][-1]
        stage = {"stage": "orchestrator", "rounds_used": last["round"], "max_rounds": rt.cfg.mas.rounds,
                 "stop_reason": last["reason"], "reason_detail": last["reason_detail"],
                 "consensus_ratio": last["consensus_ratio"], "consensus_source": last["consensus_source"],
                 "decisions": len(state["decisions"])}
        return {"answer": answer if agg["answer_artifact"] else None, "stages": [stage]}

    g = StateGraph(OrchestratorState)
    for name, fn in (("planner", planner), ("worker", worker), ("critic", critic), ("aggregator", aggregator),
                     ("controller", controller), ("finalize", finalize)):
        g.add_node(name, fn)
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", fan_out, ["worker"])
    g.add_edge("worker", "critic")
    g.add_edge("critic", "aggregator")
    g.add_edge("aggregator", "controller")
    g.add_conditional_edges("controller", after_controller, ["planner", "finalize"])
    g.add_edge("finalize", END)
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """Planner to workers, workers to critic and aggregator, the aggregate to the controller, which relays or publishes."""
    workers = worker_names(mas)
    messages = [Message(source=PLANNER.name, target=w, label="plan") for w in workers]
    messages += [Message(source=w, target=t, label="answer") for w in workers for t in (CRITIC.name, AGGREGATOR.name)]
    messages += [Message(source=CRITIC.name, target=AGGREGATOR.name, label="critique"),
                 Message(source=AGGREGATOR.name, target=CONTROLLER, label="cycle answer"),
                 Message(source=CONTROLLER, target=PLANNER.name, label="relay", dashed=True)]
    # a further cycle hands each worker its own previous answer back
    messages += [Message(source=CONTROLLER, target=w, label="own answer", dashed=True) for w in workers]
    messages += [Message(source=CONTROLLER, target=ANSWER_RECIPIENT, label="final answer", dashed=True)]
    return AgentGraph(
        participants=(Participant(name=PLANNER.name, role=PLANNER.role, row=0), Participant(name=CONTROLLER, row=0),
                      *(Participant(name=w, role=WORKER_ROLE.name, row=1) for w in workers),
                      Participant(name=CRITIC.name, role=CRITIC.role, row=2), Participant(name="tools", row=2),
                      Participant(name=AGGREGATOR.name, role=AGGREGATOR.role, row=3),
                      Participant(name=ANSWER_RECIPIENT, row=4)),
        messages=(*messages, *tool_edges([*workers, CRITIC.name, AGGREGATOR.name])))


TOPOLOGY = Topology(name="orchestrator", build=build_orchestrator,
                    roles=(PLANNER_ROLE, WORKER_ROLE, CRITIC_ROLE, AGGREGATOR_ROLE), agents=agent_graph,
                    uses_judge=True)
