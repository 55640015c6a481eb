"""``supervisor``: a supervisor agent hands the task off to specialist workers and answers from their reports.

The supervisor routes with a ``delegate`` tool call (a handoff: the graph
fans out one ``worker`` task per chosen worker with ``Send``). Workers report back concisely; the ``controller`` decides after
each delegation round whether the supervisor delegates again (the workers'
reports are relayed to each other) or writes the final answer from the
reports. Output contract of the supervisor: ``supervisor.route``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from descriptor.events import ToolResult
from mas.topologies.kit import (
    CONTROLLER,
    MAIN,
    AgentGraph,
    AgentSpec,
    LoopPosition,
    LoopState,
    MasSettings,
    Message,
    Participant,
    Role,
    RunContext,
    StageRecord,
    Topology,
    agent_turn,
    candidate,
    consensus_judge,
    context_block,
    current_tracer,
    decide,
    emit_decision,
    latest,
    make_agents,
    normalize_artifact,
    opening_messages,
    packet,
    register_system,
    round_artifacts,
    state_id_of,
    sync_step_counter,
    take_turn,
    tool_edges,
    vote_among,
)
from mas.llm.tool_calls import ToolCallRequest

SUPERVISOR_ROLE = Role(name="supervisor",
                       brief="You are the supervisor. Route the task to specialist workers, then give the final answer.")
WORKER_ROLE = Role(name="worker", brief="You are a specialist worker. Solve the sub-task you are given; be concise.")
SUPERVISOR = SUPERVISOR_ROLE.agent("supervisor", tools=False)
CONTRACT = "supervisor.route"


def worker_names(mas: MasSettings) -> list[str]:
    return [f"worker_{i}" for i in range(mas.agents)]


@tool
def delegate(workers: list[str], instruction: str) -> str:
    """Hand the task off to the named workers with a short instruction; they report back."""
    raise NotImplementedError("a handoff: routed by the supervisor graph")  # schema only


ROUTE_PROTOCOL = """To delegate, reply with ONLY a JSON block like
```json
{"name": "delegate", "arguments": {"workers": ["worker_0", "worker_1"], "instruction": "<what to do>"}}
```
Delegate first; you answer yourself only after the workers have reported."""
FINAL = "The controller ended delegation. Give the final answer to the task from the workers' reports."


class SupervisorState(LoopState, total=False):
    round: int
    """Delegation round in progress (0-based)."""
    phase: str
    """``route`` (delegate), ``final`` (answer from the reports) or ``done``."""
    delegated: dict[str, list[str]]
    """Round (as text) -> workers delegated to in that round."""
    instructions: dict[str, str]
    """Round (as text) -> the supervisor's instruction to the workers."""


def _named(call: ToolCallRequest) -> list[str]:
    """Worker names a ``delegate`` call asks for (as written)."""
    ws = call.arguments.get("workers", [])
    return [str(w) for w in (ws if isinstance(ws, list) else [ws])]


def _reports(state: SupervisorState, r: int) -> list[dict[str, Any]]:
    """The reports of the workers delegated in round ``r``."""
    return round_artifacts(state.get("history") or {}, (state.get("delegated") or {}).get(str(r), []), r)


def report_hints(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workers' reports as the supervisor's prompt shows them (confidence to 2 decimals), as call hints."""
    return [{"agent": a["agent"], "answer": str(a["answer_artifact"]).strip(),
             "confidence": float(f"{a['confidence']:.2f}")} for a in reports]


def _stage(state: SupervisorState, max_rounds: int) -> dict[str, Any]:
    return StageRecord.closing("supervisor", state["decisions"], max_rounds,
                               delegations=dict(state.get("delegated") or {}), answered=bool(state.get("answer")),
                               outcome_environment=state.get("outcome") or None).to_dict()


def _undelegated_detail(detail: str, *, answered: bool) -> str:
    """``reason_detail`` of a round in which no worker got the task.

    The branch check still fails (no report, so fewer valid artifacts than
    required), but the cause is the supervisor's routing: it either answered
    itself, and that answer is the run's answer, or named no known worker.
    """
    if answered:
        return f"the supervisor answered without delegating; its own answer is final ({detail})"
    return f"the supervisor's handoff reached no known worker ({detail})"


def build_supervisor(rt: RunContext) -> StateGraph:
    """The supervisor graph of one run.

    Routing goes through conditional edges, not ``Command`` returns: a
    rollback fork (``update_state``) re-evaluates edges from state, while a
    node's ``Command`` goto would be lost.

    On a benchmark solved by acting, each worker acts on its own environment
    (kept across rounds); the supervisor has no tools. The run's outcome is
    the environment of one worker: among the workers' last reports that
    state the supervisor's final answer (all reports when none does), the
    final vote's winner. Without any report it is the untouched environment.
    """
    workers = make_agents(rt, WORKER_ROLE, worker_names(rt.cfg.mas))
    boss = rt.specialise(SUPERVISOR)
    names = [w.name for w in workers]
    by_name = {w.name: w for w in workers}
    graph = agent_graph(rt.cfg.mas)
    roster = "Workers you can delegate to:\n" + "\n".join(
        f"- {w.name} ({w.persona or 'general specialist'})" for w in workers)

    async def outcome_of(state: SupervisorState, answer: dict[str, Any] | None) -> dict[str, Any]:
        """The state update naming the run's outcome environment (nothing without environments)."""
        if rt.new_environment is None:
            return {}
        reports = [a for a in (latest(state.get("history") or {}, n) for n in names) if a is not None]
        if not reports:
            return {"outcome": MAIN}
        said = normalize_artifact((answer or {}).get("answer_artifact"))
        stating = [a for a in reports if said and normalize_artifact(a["answer_artifact"]) == said]
        win, _ = await vote_among(rt, stating or reports)
        return {"outcome": win["agent"]}

    def handoff(call: ToolCallRequest) -> dict[str, Any]:
        if call.name != "delegate":
            return {}
        to = [w for w in _named(call) if w in by_name]
        return {"handoff": {"from": SUPERVISOR.name, "to": to}, "sends": [{"from": SUPERVISOR.name, "to": w} for w in to]}

    async def supervisor(state: SupervisorState) -> dict[str, Any]:
        sync_step_counter(state.get("steps_done", 0))
        r, notes = state.get("round", 0), state.get("notes") or []
        if state.get("phase") == "final":
            reports = [a for a in (latest(state.get("history") or {}, n) for n in names) if a is not None]
            extra = context_block(notes=notes, packets_title="Workers' reports:",
                                  packets=[packet(a) for a in reports], instruction=FINAL)
            res = await agent_turn(rt, boss, opening_messages(rt, boss, extra), answer_event="finalize",
                                   payload={"round": r}, contract=CONTRACT, hints={"reports": report_hints(reports)})
            answer = {**res.answer.to_dict(), "source_agent": SUPERVISOR.name} if res.answer else None
            outcome = await outcome_of(state, answer)
            return {"steps_done": res.steps, "answer": answer, "phase": "done", **outcome,
                    "stages": [_stage({**state, "answer": answer, **outcome}, rt.cfg.mas.max_rounds)]}
        previous = _reports(state, r - 1) if r > 0 else []
        extra = context_block(notes=[*notes, roster], packets_title="Workers' reports so far (they disagree):",
                              packets=[packet(a) for a in previous], instruction=ROUTE_PROTOCOL)
        res = await agent_turn(rt, boss, opening_messages(rt, boss, extra), answer_event="finalize",
                               payload={"round": r}, contract=CONTRACT, route_tools=[delegate],
                               on_route=handoff, hints={"workers": names, "reports": report_hints(previous)})
        for call in res.routing_calls:  # the handoff tool's result, as LangGraph's handoff tools return one
            chosen = [w for w in _named(call) if w in by_name]
            current_tracer().emit(SUPERVISOR.name, "tool_result", ToolResult(
                tool=call.name, ok=bool(chosen), tool_call_id=call.id, tool_protocol=call.protocol,
                output=f"handed off to {', '.join(chosen)}" if chosen else f"no known worker named; known: {names}",
            ), state_id=state_id_of())
        targets = [w for w in dict.fromkeys(w for c in res.routing_calls for w in _named(c)) if w in by_name]
        instruction = "; ".join(str(c.arguments.get("instruction", "")) for c in res.routing_calls).strip()
        update: dict[str, Any] = {"steps_done": res.steps, "phase": "route",
                                  "delegated": {**(state.get("delegated") or {}), str(r): targets},
                                  "instructions": {**(state.get("instructions") or {}), str(r): instruction}}
        if res.answer is not None:  # answered without delegating: its answer stands if the loop stops
            update["answer"] = {**res.answer.to_dict(), "source_agent": SUPERVISOR.name}
        return update

    async def after_supervisor(state: SupervisorState) -> list[Send] | str:
        r = state.get("round", 0)
        targets = (state.get("delegated") or {}).get(str(r), [])
        if state.get("phase") == "done":
            return END
        if not targets:
            return "controller"
        return [Send("worker", {"agent": w, "round": r, "instruction": (state.get("instructions") or {}).get(str(r), ""),
                                "notes": state.get("notes") or [], "history": state.get("history") or {},
                                "peers": _reports(state, r - 1) if r > 0 else [],
                                "steps_done": state.get("steps_done", 0), "envs": state.get("envs") or {}})
                for w in targets]

    async def worker(task: dict[str, Any]) -> dict[str, Any]:
        agent: AgentSpec = by_name[task["agent"]]
        r = task["round"]
        own = latest(task["history"], agent.name, before_round=r)
        peers = [a for a in task["peers"] if a["agent"] != agent.name]
        # its own fork of the environment, kept across rounds
        return await take_turn(rt, agent, task, round_index=r, own=own, peers=peers,
                               peers_title="Other workers' reports (relayed by the supervisor):",
                               instruction=f"The supervisor asks you: {task['instruction'] or 'solve the task'}. "
                                           "Report concisely.", sends=graph.sends(agent.name))

    async def controller(state: SupervisorState) -> dict[str, Any]:
        r = state.get("round", 0)
        delegated = (state.get("delegated") or {}).get(str(r), [])
        current = [candidate(a) for a in _reports(state, r)]
        previous = [candidate(a) for a in _reports(state, r - 1)] if r > 0 else None
        d = await decide(LoopPosition(stage="supervisor", round=r + 1, max_rounds=rt.cfg.mas.max_rounds),
                         candidate_artifacts=current, previous_candidate_artifacts=previous,
                         expected_count=len(delegated) or len(names), mode=rt.cfg.mas.termination_consensus_mode,
                         judge=consensus_judge(rt))
        if not delegated:  # say why no worker report arrived; the counts alone read like a failed worker
            d.reason_detail = _undelegated_detail(d.reason_detail, answered=bool(state.get("answer")))
        emit_decision(d, sends=graph.sends(CONTROLLER))
        update: dict[str, Any] = {"decisions": [d.model_dump()]}
        if d.stop and state.get("answer"):  # the supervisor already answered without delegating
            outcome = await outcome_of(state, state.get("answer"))
            decided = {**state, "decisions": [*(state.get("decisions") or []), d.model_dump()], **outcome}
            update.update(phase="done", stages=[_stage(decided, rt.cfg.mas.max_rounds)], **outcome)
        else:
            update.update({"phase": "final"} if d.stop else {"phase": "route", "round": r + 1})
        return update

    async def after_controller(state: SupervisorState) -> str:
        return END if state.get("phase") == "done" else "supervisor"

    g = StateGraph(SupervisorState)
    g.add_node("supervisor", supervisor)
    g.add_node("worker", worker)
    g.add_node("controller", controller)
    g.add_edge(START, "supervisor")
    g.add_conditional_edges("supervisor", after_supervisor, ["worker", "controller", END])
    g.add_edge("worker", "controller")
    g.add_conditional_edges("controller", after_controller, ["supervisor", END])
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """The supervisor hands off to every worker, which reports back; the controller decides between rounds."""
    workers = worker_names(mas)
    messages = [Message(source=SUPERVISOR.name, target=w, label="handoff") for w in workers]
    messages += [Message(source=w, target=SUPERVISOR.name, label="report") for w in workers]
    messages += [Message(source=CONTROLLER, target=SUPERVISOR.name, label="decision", dashed=True)]
    return AgentGraph(
        participants=(Participant(name=SUPERVISOR.name, role=SUPERVISOR.role, row=0),
                      Participant(name=CONTROLLER, row=0),
                      *(Participant(name=w, role=WORKER_ROLE.name, row=1) for w in workers),
                      Participant(name="tools", row=2)),
        messages=(*messages, *tool_edges(workers)))


TOPOLOGY = register_system(Topology(name="supervisor", build=build_supervisor,
                                    roles=(SUPERVISOR_ROLE, WORKER_ROLE),
                                    agents=agent_graph, uses_judge=True,
                                    description="A supervisor hands the task to specialist workers and answers from "
                                                "their reports."))
