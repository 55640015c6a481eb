"""``sas_matched``: the compute-matched single agent, k independent SAS samples and a final vote (self-consistency).

The honest form of "does collaboration pay for itself?" compares a MAS with a SAS given the same budget: a MAS
gain that a SAS spending as much would also get is a spending gain, not a collaboration gain. Each sample is the
SAS's solver with its own tool loop, and its own seed (sample 0 has the run's seed, so k = 1 is the plain SAS);
the final vote is the MAS's (``mas.final_vote_mode``). ``k`` is ``systems.sas_matched.k``, or with
``systems.sas_matched.match = "<system>"`` chosen per benchmark by the sweep so that the mean tokens per run come
near the named system's (see :func:`mas.sweep.matching.matched_k`), and handed to the run as a system option.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from mas.topologies.kit import (
    ANSWER_RECIPIENT,
    JUDGE_ACTOR,
    AgentGraph,
    LoopState,
    MasSettings,
    Message,
    Participant,
    RunContext,
    Topology,
    agent_turn,
    artifact_of,
    latest,
    log_update,
    opening_messages,
    publish_vote,
    register_system,
    sync_step_counter,
    tool_edges,
)
from mas.topologies.sas import SOLVER_ROLE

SEED_STRIDE = 7919
"""Sample i runs with seed ``run seed + i * SEED_STRIDE`` (a prime, so samples of nearby runs do not collide)."""


def sample_names(k: int) -> list[str]:
    return [f"solver_{i}" for i in range(k)]


def samples(rt: RunContext) -> int:
    """k: the sweep's matched value for this run, else ``systems.sas_matched.k``."""
    return int(rt.system_options.get("k") or rt.cfg.systems.sas_matched.k)


def build_sas_matched(rt: RunContext) -> StateGraph:
    """The graph of one run: k samples in parallel (LangGraph ``Send``), then the final vote."""
    names = sample_names(samples(rt))

    async def fan_out(state: LoopState) -> list[Send]:
        return [Send("sample", {"index": i, "notes": state.get("notes") or [], "envs": state.get("envs") or {},
                                "steps_done": state.get("steps_done", 0)}) for i in range(len(names))]

    async def sample(task: dict[str, Any]) -> dict[str, Any]:
        sync_step_counter(task["steps_done"])
        i = task["index"]
        agent = rt.specialise(SOLVER_ROLE.agent(names[i]))
        own = rt.with_models(rt.models.reseeded(i * SEED_STRIDE)) if i else rt
        env = rt.environment(task.get("envs"), agent.name)  # each sample acts on its own branch
        tools = rt.toolbox(env)
        res = await agent_turn(own, agent, opening_messages(own, agent, "\n".join(task["notes"]), tools),
                               answer_event="act", toolbox=tools, sends=[{"from": agent.name, "to": JUDGE_ACTOR}])
        return {"history": {agent.name: [artifact_of(agent, 0, res, env)]}, "steps_done": res.steps,
                **log_update(agent.name, env)}

    async def vote(state: LoopState) -> dict[str, Any]:
        history = state.get("history") or {}
        arts = [a for a in (latest(history, n) for n in names) if a is not None]
        return (await publish_vote(rt, arts, state=state)).update()

    g = StateGraph(LoopState)
    g.add_node("sample", sample)
    g.add_node("vote", vote)
    g.add_conditional_edges(START, fan_out, ["sample"])
    g.add_edge("sample", "vote")
    g.add_edge("vote", END)
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """The samples answer alone; the judge votes among them. Drawn with the configured k (the sweep may match
    another)."""
    from mas.study_settings import SasMatchedSettings

    names = sample_names(SasMatchedSettings().k)
    return AgentGraph(
        participants=(*(Participant(name=n, role=SOLVER_ROLE.name, row=0) for n in names),
                      Participant(name="tools", row=1), Participant(name=JUDGE_ACTOR, row=2),
                      Participant(name=ANSWER_RECIPIENT, row=3)),
        messages=(*(Message(source=n, target=JUDGE_ACTOR, label="answer") for n in names),
                  Message(source=JUDGE_ACTOR, target=ANSWER_RECIPIENT, label="final answer", dashed=True),
                  *tool_edges(names)))


TOPOLOGY = register_system(Topology(name="sas_matched", build=build_sas_matched, roles=(SOLVER_ROLE,),
                                   agents=agent_graph, uses_judge=True, single_agent=True,
                                   description="k independent SAS samples and a final vote: a single agent given a "
                                               "MAS's budget."))
