"""``representative_exchange``: groups deliberate and elect representatives, who exchange answers across groups.

``mas.groups`` groups of ``mas.agents_per_group`` members. Every member
answers the task independently (``Send`` fan-out; its answer goes to its
group's election); ``elect`` has each group's judge (``mas.election_mode =
"llm_judge"``, the ``judge.vote`` contract) or a lexical vote (``"lexical"``)
choose the member who speaks for the group. The ``controller`` decides after
the election (round 0) and after every exchange round, with the same four
stop reasons in the same order as every looped stage (no stop on consensus
or stalling before ``mas.minimum_discussion_rounds`` exchange rounds, at most
``mas.max_rounds``). In an exchange round each representative reads the other
groups' representatives' latest answers and keeps or changes its own. When
the controller stops, ``vote`` (``mas.final_vote_mode``) picks the final
answer among the representatives and publishes it to the ``user``.

The group's voice in the exchange is the actor ``representative_<group>``:
the election hands it the elected member's answer and environment (the
``Election`` event names both). Messages: a member's answer goes to
``system:judge`` (its group's election); the election hands the group to its
representative; a representative's answer goes to every other
representative; a continuing decision goes to the representatives, a stop
to ``system:judge``.

On a benchmark solved by acting, every member acts on its own environment;
the representative takes over the elected member's (and may change it
further); the final vote's winner's environment is the run's outcome.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from descriptor.events import Election
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
    candidate,
    current_tracer,
    final_vote,
    finish_loop,
    latest,
    lexical_groups,
    make_agents,
    register_system,
    round_artifacts,
    round_decision,
    state_id_of,
    take_turn,
    tool_edges,
)

STAGE = "representative_exchange"
MEMBER_ROLE = Role(name="member", brief="You are a member of a small group. Solve the task yourself; your group "
                                        "elects one member's answer to speak for it.")
REPRESENTATIVE_ROLE = Role(name="representative", brief="You are your group's elected representative. Compare your "
                                                        "group's answer with the other groups' and give the best answer.")
EXCHANGE = ("These are the answers of the other groups' representatives. Re-check the task and your group's answer; "
            "use a tool if a value needs checking. Keep your answer if it is right, change it if it is wrong.")


def member_names(mas: MasSettings) -> list[list[str]]:
    """Per group, its members' names (``member_<group>_<i>``)."""
    return [[f"member_{g}_{i}" for i in range(mas.agents_per_group)] for g in range(mas.groups)]


def representative_names(mas: MasSettings) -> list[str]:
    return [f"representative_{g}" for g in range(mas.groups)]


class ExchangeState(LoopState, total=False):
    round: int
    """0: the members' answers and the elections; k >= 1: exchange round k."""
    representatives: dict[str, str]
    """Group (as text) -> the member it elected."""


def build_representative_exchange(rt: RunContext) -> StateGraph:
    """The representative-exchange graph of one run."""
    groups = member_names(rt.cfg.mas)
    members = [a for names in groups for a in make_agents(rt, MEMBER_ROLE, names)]
    by_name: dict[str, AgentSpec] = {m.name: m for m in members}
    group_of = {name: g for g, names in enumerate(groups) for name in names}
    reps = make_agents(rt, REPRESENTATIVE_ROLE, representative_names(rt.cfg.mas))
    rep_names = [r.name for r in reps]
    group_of.update({r: g for g, r in enumerate(rep_names)})
    by_name.update({r.name: r for r in reps})
    graph = agent_graph(rt.cfg.mas)

    async def fan_out_members(state: ExchangeState) -> list[Send]:
        return [Send("member", {"agent": m.name, "notes": state.get("notes") or [],
                                "steps_done": state.get("steps_done", 0), "envs": state.get("envs") or {}})
                for m in members]

    async def member(task: dict[str, Any]) -> dict[str, Any]:
        agent = by_name[task["agent"]]
        return await take_turn(rt, agent, task, round_index=0, sends=graph.sends(agent.name),
                               payload={"round": 0, "group": group_of[agent.name]})

    async def elect(state: ExchangeState) -> dict[str, Any]:
        """Each group's vote; its representative takes over the elected member's answer (round 0) and environment."""
        history, envs = state.get("history") or {}, state.get("envs") or {}
        chosen, handed, logs = {}, {}, {}
        for g, names in enumerate(groups):
            arts = round_artifacts(history, names, 0)
            cands = [candidate(a) for a in arts]
            out = await final_vote(rt, cands, rt.cfg.mas.election_mode, vote=f"election {g}")
            elected, rep = arts[out.winner_index], rep_names[g]
            chosen[str(g)] = elected["agent"]
            handed[rep] = [{**elected, "agent": rep, "elected": elected["agent"]}]
            if elected["agent"] in envs:
                logs[rep] = envs[elected["agent"]]
            current_tracer().emit(JUDGE_ACTOR, "verify", Election(
                group=g, members=names, elected=elected["agent"], representative=rep, vote_source=out.source,
                groups=[[cands[i].agent for i in grp] for grp in out.groups], invalid_indices=out.invalid_indices,
                explanation=out.explanation, judge_error=out.error, sends=[{"from": JUDGE_ACTOR, "to": rep}],
                answer_groups=lexical_groups(cands), shown_order=out.shown_order,
            ), state_id=state_id_of(), **out.envelope())
        return {"representatives": chosen, "round": 0, "history": handed, **({"envs": logs} if logs else {})}

    async def representative(task: dict[str, Any]) -> dict[str, Any]:
        agent = by_name[task["agent"]]
        r, history = task["round"], task["history"]
        own = latest(history, agent.name, before_round=r)
        others = [a for a in (latest(history, n, before_round=r) for n in rep_names if n != agent.name) if a]
        # its branch: the elected member's environment, handed over
        return await take_turn(rt, agent, task, round_index=r, own=own, peers=others,
                               peers_title="The other groups' representatives' answers:", instruction=EXCHANGE,
                               sends=graph.sends(agent.name), payload={"round": r, "group": group_of[agent.name]})

    def answers(state: ExchangeState, r: int) -> list[dict[str, Any]]:
        """The representatives' artifacts of round ``r`` (round 0: the elected members' answers)."""
        return round_artifacts(state.get("history") or {}, rep_names, r)

    async def controller(state: ExchangeState) -> dict[str, Any]:
        r = state.get("round", 0)
        # a stop hands the representatives' answers to the judge (the final vote); else the next round starts
        return await round_decision(rt, stage=STAGE, round_index=r, current=answers(state, r),
                                    previous=answers(state, r - 1) if r > 0 else None, expected_count=len(groups),
                                    sends=lambda stop: graph.sends(CONTROLLER, "final vote" if stop else "next round"))

    async def after_controller(state: ExchangeState) -> list[Send] | str:
        if state["decisions"][-1]["stop"]:
            return "vote"
        return [Send("representative", {"agent": n, "round": state.get("round", 0), "history": state.get("history") or {},
                                        "notes": state.get("notes") or [], "steps_done": state.get("steps_done", 0),
                                        "envs": state.get("envs") or {}})
                for n in rep_names]

    async def vote(state: ExchangeState) -> dict[str, Any]:
        history = state.get("history") or {}
        arts = [a for a in (latest(history, n) for n in rep_names) if a is not None]
        return await finish_loop(rt, state, stage=STAGE, vote=arts,
                                 representatives=dict(state.get("representatives") or {}))

    g = StateGraph(ExchangeState)
    for name, fn in (("member", member), ("elect", elect), ("representative", representative),
                     ("controller", controller), ("vote", vote)):
        g.add_node(name, fn)
    g.add_conditional_edges(START, fan_out_members, ["member"])
    g.add_edge("member", "elect")
    g.add_edge("elect", "controller")
    g.add_conditional_edges("controller", after_controller, ["representative", "vote"])
    g.add_edge("representative", "controller")
    g.add_edge("vote", END)
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """Members answer to their group's election, which hands the group to its representative; representatives
    exchange with each other under the controller; the judge's final vote goes to the user."""
    everyone = [n for names in member_names(mas) for n in names]
    reps = representative_names(mas)
    messages = [Message(source=n, target=JUDGE_ACTOR, label="answer") for n in everyone]
    messages += [Message(source=JUDGE_ACTOR, target=r, label="elected", dashed=True) for r in reps]
    messages += [Message(source=a, target=b, label="exchange") for a in reps for b in reps if a != b]
    messages += [Message(source=CONTROLLER, target=r, label="next round", dashed=True) for r in reps]
    messages += [Message(source=CONTROLLER, target=JUDGE_ACTOR, label="final vote", dashed=True),
                 Message(source=JUDGE_ACTOR, target=ANSWER_RECIPIENT, label="final answer", dashed=True)]
    return AgentGraph(
        participants=(*(Participant(name=n, role=MEMBER_ROLE.name, row=0) for n in everyone),
                      Participant(name=JUDGE_ACTOR, row=1), Participant(name=ANSWER_RECIPIENT, row=1),
                      *(Participant(name=r, role=REPRESENTATIVE_ROLE.name, row=2) for r in reps),
                      Participant(name=CONTROLLER, row=3), Participant(name="tools", row=3)),
        messages=(*messages, *tool_edges([*everyone, *reps])))


TOPOLOGY = register_system(Topology(name=STAGE, build=build_representative_exchange,
                                    roles=(MEMBER_ROLE, REPRESENTATIVE_ROLE),
                                    agents=agent_graph, uses_judge=True,
                                    description="Groups deliberate and elect representatives, who exchange answers "
                                                "across groups."))
