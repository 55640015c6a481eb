"""``orchestrator``: planner -> workers on subtasks (``Send`` fan-out) -> critic -> aggregator, in cycles.

One cycle: the planner splits the task into one subtask per worker
(structured output, :data:`~mas.topologies.decomposition.PLAN_CONTRACT`);
each worker solves its subtask with tools (``payload.subtask`` on its
events); the critic checks the parts and names the ones it rejects
(:data:`~mas.topologies.decomposition.CRITIQUE_CONTRACT`); the aggregator
composes the cycle's answer from the parts and the critique and sends it to
the ``controller``. The controller decides between cycles: the branch check
and progress run over the workers' parts, consensus is the critic's and the
aggregator's answers agreeing (the critic accepts the composition); a judge
model sees both, the parts with each worker's previous part, as the lexical
fallback compares them;
``mas.rounds`` bounds the cycles (``rounds = 1`` runs exactly one). When it
stops, ``finalize`` publishes the last aggregate to the ``user``; for a
further cycle the controller relays the critique and the aggregate to the
planner, and each worker sees its own previous part. Revisions in a later
cycle redo work after a critique (``payload.redo``).

On a benchmark solved by acting, each worker acts on a fork of the run's
environment (branch ``main``) taken at the cycle's start; the critic checks
on a scratch fork that holds every part; the aggregator's node applies the
state changes of the parts the critic did not reject to ``main`` (traced as
the aggregator's tool calls, :func:`~mas.topologies.decomposition.merge_parts`),
then the aggregator may act on ``main`` itself. ``main`` is the run's outcome;
a rejected part leaves no trace in it and is planned again.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from mas.topologies.kit import (
    ANSWER_RECIPIENT,
    CONTROLLER,
    MAIN,
    AgentGraph,
    LoopPosition,
    LoopState,
    MasSettings,
    Message,
    Participant,
    Role,
    RunContext,
    Topology,
    agent_turn,
    artifact_of,
    candidate,
    changes_text,
    consensus_judge,
    context_block,
    decide,
    emit_decision,
    event_for,
    finish_loop,
    latest,
    log_update,
    make_agents,
    opening_messages,
    packet,
    register_system,
    round_artifacts,
    sync_step_counter,
    tool_edges,
)
from mas.topologies.decomposition import (
    CRITIQUE_CONTRACT,
    CRITIQUE_INSTRUCTION,
    CRITIQUE_SCHEMA,
    PLAN_CONTRACT,
    merge_parts,
    part_changes,
    plan_instruction,
    plan_schema,
    rejected_of,
    subtasks_of,
)

PLANNER_ROLE = Role(name="planner", brief="You are the planner. Break the task into a few short, concrete sub-tasks.")
WORKER_ROLE = Role(name="worker", brief="You are a specialist worker. Solve the sub-task you are given; be concise.")
CRITIC_ROLE = Role(name="critic",
                   brief="You are the critic. Check the workers' answers against the task and point out errors.")
AGGREGATOR_ROLE = Role(name="aggregator", brief="You are the aggregator. Produce the single final answer from the "
                                                "workers' results and the critique.")
PLANNER = PLANNER_ROLE.agent("planner", tools=False)
CRITIC = CRITIC_ROLE.agent("critic")
AGGREGATOR = AGGREGATOR_ROLE.agent("aggregator")
COMPOSE = "Compose the single final answer to the task from the workers' parts and the critique."


def worker_names(mas: MasSettings) -> list[str]:
    return [f"worker_{i}" for i in range(mas.agents)]


class OrchestratorState(LoopState, total=False):
    cycle: int
    """Cycle in progress (0-based)."""


def part_hints(arts: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The workers' parts as the critic and the aggregator are shown them, as call hints (a test double reads
    these instead of the packets' text): worker, answer, subtask, changes (``none`` without an environment)."""
    return [{"worker": a["agent"], "answer": str(a["answer_artifact"]).strip(), "subtask": a.get("subtask") or "",
             "changes": a["changes"] if a.get("changes") is not None else "none"} for a in arts]


def build_orchestrator(rt: RunContext) -> StateGraph:
    """The orchestrator graph of one run."""
    workers = make_agents(rt, WORKER_ROLE, worker_names(rt.cfg.mas))
    names = [w.name for w in workers]
    by_name = {w.name: w for w in workers}
    graph = agent_graph(rt.cfg.mas)
    planner_agent, critic_agent, aggregator_agent = (rt.specialise(a) for a in (PLANNER, CRITIC, AGGREGATOR))

    async def planner(state: OrchestratorState) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        c, history = state.get("cycle", 0), state.get("history") or {}
        own = latest(history, PLANNER.name)
        relayed = [packet(a) for a in (latest(history, CRITIC.name), latest(history, AGGREGATOR.name)) if a]
        env = rt.environment(state.get("envs"), MAIN)
        notes = [*(state.get("notes") or []),
                 *([f"Changes already made in the environment: {changes_text(env)}"] if env is not None else [])]
        extra = context_block(notes=notes, packets_title="Last cycle's critique and answer:", packets=relayed, own=own,
                              own_label="Your previous plan", instruction=plan_instruction(len(names)))
        res = await agent_turn(rt, planner_agent, opening_messages(rt, planner_agent, extra), answer_event=event_for(own, "plan"),
                               sends=graph.sends(PLANNER.name),
                               payload={"cycle": c}, contract=PLAN_CONTRACT, answer_schema=plan_schema(len(names)),
                               redo_revise=c > 0, hints={"workers": len(names),
                                                         "changes_made": changes_text(env) if env is not None else None})
        subtasks, source = subtasks_of(res.parsed, len(names))
        art = {**artifact_of(PLANNER, c, res), "subtasks": subtasks, "subtasks_source": source}
        return {"history": {PLANNER.name: [art]}, "steps_done": res.steps}

    async def fan_out(state: OrchestratorState) -> list[Send]:
        c, history = state.get("cycle", 0), state.get("history") or {}
        plan = latest(history, PLANNER.name) or {}
        subtasks = plan.get("subtasks") or subtasks_of(None, len(names))[0]
        return [Send("worker", {"agent": n, "cycle": c, "subtask": subtasks[i], "own": latest(history, n),
                                "notes": state.get("notes") or [], "steps_done": state.get("steps_done", 0),
                                "envs": state.get("envs") or {}}) for i, n in enumerate(names)]

    async def worker(task: dict[str, Any]) -> dict[str, Any]:
        sync_step_counter(task["steps_done"])
        agent, c, own, subtask = by_name[task["agent"]], task["cycle"], task["own"], task["subtask"]
        i = names.index(agent.name)
        env = rt.environment(task["envs"], MAIN)  # a fresh fork of the run's environment, every cycle
        since = len(env.actions) if env is not None else 0
        tools = rt.toolbox(env)
        extra = context_block(notes=task["notes"], own=own, own_label="Your previous part",
                              instruction=f"You are worker {i + 1} of {len(names)}.\nYour subtask: {subtask}\n"
                                          "Solve your subtask (use the tools) and report its result concisely; the "
                                          "aggregator composes the parts.")
        res = await agent_turn(rt, agent, opening_messages(rt, agent, extra, tools), answer_event=event_for(own),
                               sends=graph.sends(agent.name),
                               payload={"cycle": c, "subtask": subtask}, toolbox=tools,
                               redo_revise=c > 0, hints={"subtask": subtask})
        art = {**artifact_of(agent, c, res, env, since=since), "subtask": subtask}
        return {"history": {agent.name: [art]}, "steps_done": res.steps, **log_update(agent.name, env)}

    async def critic(state: OrchestratorState) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        c, history, envs = state.get("cycle", 0), state.get("history") or {}, state.get("envs") or {}
        env = rt.environment(envs, MAIN)  # a scratch fork holding every part: what the critic does here never counts
        if env is not None:
            for n in names:
                for call in part_changes(envs, n, env):
                    env.call(call["name"], call["args"])
        tools = rt.toolbox(env)
        arts = round_artifacts(history, names, c)
        extra = context_block(notes=state.get("notes") or [], packets_title="The workers' parts:",
                              packets=[packet(a) for a in arts], instruction=CRITIQUE_INSTRUCTION)
        res = await agent_turn(rt, critic_agent, opening_messages(rt, critic_agent, extra, tools), answer_event="verify",
                               sends=graph.sends(CRITIC.name),
                               payload={"cycle": c}, contract=CRITIQUE_CONTRACT, answer_schema=CRITIQUE_SCHEMA,
                               toolbox=tools, hints={"parts": part_hints(arts)})
        art = {**artifact_of(CRITIC, c, res), "rejected": rejected_of(res.parsed, names)}
        return {"history": {CRITIC.name: [art]}, "steps_done": res.steps}

    async def aggregator(state: OrchestratorState) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        c, history, envs = state.get("cycle", 0), state.get("history") or {}, state.get("envs") or {}
        own, critique = latest(history, AGGREGATOR.name), latest(history, CRITIC.name) or {}
        rejected = critique.get("rejected") or []
        env = rt.environment(envs, MAIN)
        notes = list(state.get("notes") or [])
        if env is not None:  # the accepted parts' changes become the run's
            merge_parts(aggregator_agent, env, [(n, part_changes(envs, n, env)) for n in names if n not in rejected])
            notes.append(f"Changes now in the environment: {changes_text(env)}")
        hints = {"parts": part_hints(round_artifacts(history, names, c)),
                 "critique": {"answer": str(critique["answer_artifact"]).strip(), "rejected": list(rejected)}
                 if critique else None, "changes_now": changes_text(env) if env is not None else None}
        if rejected:
            notes.append(f"The critic rejected the parts of: {', '.join(rejected)}.")
        tools = rt.toolbox(env)
        inputs = [packet(a) for a in round_artifacts(history, [*names, CRITIC.name], c)]
        extra = context_block(notes=notes, packets_title="The workers' parts and the critique:", packets=inputs,
                              instruction=COMPOSE)
        # the cycle's answer goes to the controller, which relays it to the planner or publishes it
        res = await agent_turn(rt, aggregator_agent, opening_messages(rt, aggregator_agent, extra, tools),
                               answer_event=event_for(own), sends=graph.sends(AGGREGATOR.name),
                               payload={"cycle": c}, toolbox=tools, redo_revise=c > 0,
                               hints=hints)
        return {"history": {AGGREGATOR.name: [artifact_of(AGGREGATOR, c, res)]}, "steps_done": res.steps,
                **log_update(MAIN, env)}

    async def controller(state: OrchestratorState) -> dict[str, Any]:
        c, history = state.get("cycle", 0), state.get("history") or {}
        current = [candidate(a) for a in round_artifacts(history, names, c)]
        previous = [candidate(a) for a in round_artifacts(history, names, c - 1)] if c > 0 else None
        verdicts = [candidate(a) for a in round_artifacts(history, [CRITIC.name, AGGREGATOR.name], c)]
        # the judge sees the critic and the aggregator with their own last cycle, and the parts with the workers'
        verdicts_before = ([candidate(a) for a in round_artifacts(history, [CRITIC.name, AGGREGATOR.name], c - 1)]
                           if c > 0 else None)
        d = await decide(LoopPosition(stage="orchestrator", round=c + 1, max_rounds=rt.cfg.mas.rounds),
                         candidate_artifacts=current, previous_candidate_artifacts=previous,
                         consensus_artifacts=verdicts, previous_consensus_artifacts=verdicts_before,
                         expected_count=len(names),
                         mode=rt.cfg.mas.termination_consensus_mode, judge=consensus_judge(rt))
        # continuing relays the critique and the aggregate to the planner (and each worker its own part)
        sends = None if d.stop else graph.sends(CONTROLLER, "relay", "own part")
        emit_decision(d, sends=sends)
        return {"decisions": [d.model_dump()], "cycle": c if d.stop else c + 1}

    async def after_controller(state: OrchestratorState) -> str:
        return "finalize" if state["decisions"][-1]["stop"] else "planner"

    async def finalize(state: OrchestratorState) -> dict[str, Any]:
        agg = latest(state.get("history") or {}, AGGREGATOR.name)
        assert agg is not None
        return await finish_loop(rt, state, stage="orchestrator", winner=agg, selection="aggregator",
                                 outcome=MAIN if rt.new_environment else None, max_rounds=rt.cfg.mas.rounds,
                                 finalize={"cycle": state.get("cycle", 0)})

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
    """Subtasks to the workers, parts to critic and aggregator, the aggregate to the controller (relay or publish)."""
    workers = worker_names(mas)
    messages = [Message(source=PLANNER.name, target=w, label="subtask") for w in workers]
    messages += [Message(source=w, target=t, label="part") for w in workers for t in (CRITIC.name, AGGREGATOR.name)]
    messages += [Message(source=CRITIC.name, target=AGGREGATOR.name, label="critique"),
                 Message(source=AGGREGATOR.name, target=CONTROLLER, label="cycle answer"),
                 Message(source=CONTROLLER, target=PLANNER.name, label="relay", dashed=True)]
    # a further cycle hands each worker its own previous part back
    messages += [Message(source=CONTROLLER, target=w, label="own part", dashed=True) for w in workers]
    messages += [Message(source=CONTROLLER, target=ANSWER_RECIPIENT, label="final answer", dashed=True)]
    return AgentGraph(
        participants=(Participant(name=PLANNER.name, role=PLANNER.role, row=0), Participant(name=CONTROLLER, row=0),
                      *(Participant(name=w, role=WORKER_ROLE.name, row=1) for w in workers),
                      Participant(name=CRITIC.name, role=CRITIC.role, row=2), Participant(name="tools", row=2),
                      Participant(name=AGGREGATOR.name, role=AGGREGATOR.role, row=3),
                      Participant(name=ANSWER_RECIPIENT, row=4)),
        messages=(*messages, *tool_edges([*workers, CRITIC.name, AGGREGATOR.name])))


TOPOLOGY = register_system(Topology(name="orchestrator", build=build_orchestrator,
                                    roles=(PLANNER_ROLE, WORKER_ROLE, CRITIC_ROLE, AGGREGATOR_ROLE), agents=agent_graph,
                                    uses_judge=True,
                                    description="A planner splits the task, workers solve the parts, a critic "
                                                "reviews and an aggregator answers, in cycles."))
