"""``supervisor``: a supervisor agent hands the task off to specialist workers and answers from their reports.

The supervisor routes with a ``delegate`` tool call (a handoff: the graph
answers it with a ``Command`` that fans out one ``worker`` task per chosen
worker). Workers report back concisely; the ``controller`` decides after
each delegation round whether the supervisor delegates again (the workers'
reports are relayed to each other) or writes the final answer from the
reports. Output contract of the supervisor: ``supervisor.route``.
"""

from __future__ import annotations

import json
import operator
import re
import uuid
from collections import Counter
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send

from mas.agent import AgentSpec, RunContext, state_id_of
from mas.judge import consensus_judge
from mas.llm import ToolCallRequest
from mas.roles import (
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
    turn,
)
from mas.scripted import ScriptedContext, responder
from mas.termination import (
    CONTROLLER,
    LoopPosition,
    decide,
    emit_decision,
    normalize_artifact,
)
from mas.tracing import current_tracer

SUPERVISOR = AgentSpec(name="supervisor", role="supervisor", tools=False)
CONTRACT = "supervisor.route"
_WORKER_LINE = re.compile(r"^- (?P<name>worker_\d+)\b", re.MULTILINE)
_PACKET = re.compile(r"^\[(?P<sender>[^\]]+)\] answer: (?P<answer>.*?) \(confidence (?P<conf>[0-9.]+)\)", re.MULTILINE)


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


class SupervisorState(TypedDict, total=False):
    round: int
    """Delegation round in progress (0-based)."""
    phase: str
    """``route`` (delegate) or ``final`` (answer from the reports)."""
    delegated: dict[str, list[str]]
    """Round (as text) -> workers delegated to in that round."""
    history: Annotated[dict[str, list[dict[str, Any]]], merge_history]
    """Per worker: its report of every round it was delegated."""
    decisions: Annotated[list[dict[str, Any]], operator.add]
    steps_done: Annotated[int, operator.add]
    notes: Annotated[list[str], operator.add]
    answer: dict[str, Any] | None
    stages: list[dict[str, Any]]


def build_supervisor(rt: RunContext) -> StateGraph:
    """The supervisor graph of one run."""
    workers = make_agents(rt, "worker", "worker")
    names = [w.name for w in workers]
    by_name = {w.name: w for w in workers}
    roster = "Workers you can delegate to:\n" + "\n".join(
        f"- {w.name} ({w.persona or 'general specialist'})" for w in workers)

    def reports_of(state: SupervisorState, r: int) -> list[dict[str, Any]]:
        return round_artifacts(state.get("history") or {}, (state.get("delegated") or {}).get(str(r), []), r)

    async def supervisor(state: SupervisorState, config: RunnableConfig) -> Command:
        sync_step_counter(state.get("steps_done", 0))
        r, notes = state.get("round", 0), state.get("notes") or []
        if state.get("phase") == "final":
            return await _final(state, config, notes)
        previous = reports_of(state, r - 1) if r > 0 else []
        extra = context_block(notes=[*notes, roster], packets_title="Workers' reports so far (they disagree):",
                              packets=[packet(a) for a in previous], instruction=ROUTE_PROTOCOL)
        res = await turn(rt, SUPERVISOR, extra, choose_event=lambda _a: "finalize", state_id=state_id_of(config),
                         payload={"round": r}, contract=CONTRACT, route_tools=[delegate], on_route=_handoff)
        if res.answer is not None or res.error is not None:  # answered (or failed) without delegating
            answer = {**res.answer.to_dict(), "source_agent": SUPERVISOR.name} if res.answer else None
            return Command(goto="controller", update={"steps_done": res.steps, "delegated": {
                **(state.get("delegated") or {}), str(r): []}, "answer": answer})
        targets = _targets(res.routing_calls)
        for call in res.routing_calls:
            chosen = [w for w in _named(call) if w in by_name]
            current_tracer().emit(SUPERVISOR.name, "tool_result", {
                "tool": call.name, "ok": bool(chosen), "tool_call_id": call.id, "tool_protocol": call.protocol,
                "output": f"handed off to {', '.join(chosen)}" if chosen else f"no known worker named; known: {names}",
            }, state_id=state_id_of(config))
        instruction = "; ".join(str(c.arguments.get("instruction", "")) for c in res.routing_calls).strip()
        update = {"steps_done": res.steps, "delegated": {**(state.get("delegated") or {}), str(r): targets}}
        sends = [Send("worker", {"agent": w, "round": r, "instruction": instruction, "notes": notes,
                                 "history": state.get("history") or {}, "peers": previous,
                                 "steps_done": state.get("steps_done", 0) + res.steps}) for w in targets]
        return Command(goto=sends or "controller", update=update)

    def _named(call: ToolCallRequest) -> list[str]:
        ws = call.arguments.get("workers", [])
        return [str(w) for w in (ws if isinstance(ws, list) else [ws])]

    def _targets(calls: list[ToolCallRequest]) -> list[str]:
        return [w for w in dict.fromkeys(w for c in calls for w in _named(c)) if w in by_name]

    def _handoff(call: ToolCallRequest) -> dict[str, Any]:
        if call.name != "delegate":
            return {}
        to = [w for w in _named(call) if w in by_name]
        return {"handoff": {"from": SUPERVISOR.name, "to": to},
                "sends": [{"from": SUPERVISOR.name, "to": w} for w in to]}

    async def _final(state: SupervisorState, config: RunnableConfig, notes: list[str]) -> Command:
        r = state.get("round", 0)
        reports = [a for a in (latest(state.get("history") or {}, n) for n in names) if a is not None]
        extra = context_block(notes=notes, packets_title="Workers' reports:", packets=[packet(a) for a in reports],
                              instruction=FINAL)
        res = await turn(rt, SUPERVISOR, extra, choose_event=lambda _a: "finalize", state_id=state_id_of(config),
                         payload={"round": r}, contract=CONTRACT)
        answer = ({**res.answer.to_dict(), "source_agent": SUPERVISOR.name} if res.answer is not None else None)
        return Command(goto=END, update={"steps_done": res.steps, "answer": answer,
                                         "stages": [_stage(state, answer)]})

    def _stage(state: SupervisorState, answer: dict[str, Any] | None) -> dict[str, Any]:
        last = state["decisions"][-1]
        return {"stage": "supervisor", "rounds_used": last["round"], "max_rounds": rt.cfg.mas.max_rounds,
                "stop_reason": last["reason"], "reason_detail": last["reason_detail"],
                "consensus_ratio": last["consensus_ratio"], "consensus_source": last["consensus_source"],
                "decisions": len(state["decisions"]),
                "delegations": {k: v for k, v in (state.get("delegated") or {}).items()},
                "answered": answer is not None}

    async def worker(task: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        sync_step_counter(task["steps_done"])
        agent: AgentSpec = by_name[task["agent"]]
        r = task["round"]
        own = latest(task["history"], agent.name, before_round=r)
        peers = [packet(a) for a in task["peers"] if a["agent"] != agent.name]
        extra = context_block(notes=task["notes"], packets_title="Other workers' reports (relayed by the supervisor):",
                              packets=peers, own=own,
                              instruction=f"The supervisor asks you: {task['instruction'] or 'solve the task'}. "
                                          "Report concisely.")
        res = await turn(rt, agent, extra, choose_event=event_for(own), sends=[{"from": agent.name, "to": "supervisor"}],
                         state_id=state_id_of(config), payload={"round": r})
        return {"history": {agent.name: [artifact_of(agent, r, res)]}, "steps_done": res.steps}

    async def controller(state: SupervisorState, config: RunnableConfig) -> Command:
        r = state.get("round", 0)
        delegated = (state.get("delegated") or {}).get(str(r), [])
        current = [candidate(a) for a in reports_of(state, r)]
        previous = [candidate(a) for a in reports_of(state, r - 1)] if r > 0 else None
        d = await decide(LoopPosition(stage="supervisor", round=r + 1, max_rounds=rt.cfg.mas.max_rounds),
                         candidate_artifacts=current, previous_candidate_artifacts=previous,
                         expected_count=len(delegated) or len(names), mode=rt.cfg.mas.termination_consensus_mode,
                         judge=consensus_judge(rt))
        emit_decision(d, state_id=state_id_of(config), sends=[{"from": CONTROLLER, "to": SUPERVISOR.name}])
        update: dict[str, Any] = {"decisions": [d.payload()]}
        if d.stop and state.get("answer"):  # the supervisor already answered without delegating
            update["stages"] = [_stage({**state, "decisions": [*(state.get("decisions") or []), d.payload()]},
                                       state["answer"])]
            return Command(goto=END, update=update)
        update.update({"phase": "final"} if d.stop else {"phase": "route", "round": r + 1})
        return Command(goto="supervisor", update=update)

    g = StateGraph(SupervisorState)
    g.add_node("supervisor", supervisor, destinations=("worker", "controller", END))
    g.add_node("worker", worker)
    g.add_node("controller", controller, destinations=("supervisor", END))
    g.add_edge(START, "supervisor")
    g.add_edge("worker", "controller")
    return g


BUILDER = build_supervisor


# ---- scripted supervisor ----------------------------------------------------------------


def _plurality(packets: list[re.Match[str]]) -> tuple[str, float] | None:
    """The answer most workers reported (ties: the larger total confidence, then first seen)."""
    if not packets:
        return None
    votes: Counter[str] = Counter()
    conf: Counter[str] = Counter()
    first: dict[str, str] = {}
    for m in packets:
        key = normalize_artifact(m["answer"])
        votes[key] += 1
        conf[key] += float(m["conf"])
        first.setdefault(key, m["answer"].strip())
    best = max(votes, key=lambda k: (votes[k], conf[k]))
    return first[best], conf[best] / votes[best]


@responder(CONTRACT)
def scripted_supervisor(ctx: ScriptedContext) -> str | AIMessage:
    """Delegates to every listed worker; answers with the workers' plurality once asked for the final answer.

    Injected: routes to a worker that does not exist, or reports a wrong final value.
    """
    last = str(ctx.messages[-1].content)
    if "tools" in ctx.kwargs:
        workers = [m["name"] for m in _WORKER_LINE.finditer(last)]
        if ctx.inject:  # the wrong routing step: a worker that does not exist, so nobody gets the task
            workers = [f"worker_{len(workers) + 6}"]
        args = {"workers": workers, "instruction": "Solve the task step by step with the calculator and report the number."}
        if ctx.text_tools:
            return AIMessage(content="```json\n" + json.dumps({"name": "delegate", "arguments": args}) + "\n```")
        return AIMessage(content="", tool_calls=[{"name": "delegate", "args": args, "id": f"call_{uuid.uuid4().hex[:10]}"}])
    best = _plurality(list(_PACKET.finditer(last)))
    if best is None:
        return json.dumps({"reasoning": "No reports arrived.", "answer_artifact": "0", "confidence": 0.1})
    answer, conf = best
    if ctx.inject:
        answer = str(int(answer) + 1) if answer.lstrip("-").isdigit() else answer + " (unchecked)"
    return json.dumps({"reasoning": "Most workers reported this value.", "answer_artifact": answer,
                       "confidence": round(conf, 2)})
