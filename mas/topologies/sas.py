"""The single-agent system: one solver with a tool loop, as a LangGraph graph.

``agent`` makes one LLM call per super-step and ``tools`` runs the calls it
asked for, so every step of the trajectory has its own top-level checkpoint
(the point a rollback resumes from).
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from mas.topologies.kit import (
    MAIN,
    TOOLS_NODE,
    AgentGraph,
    MasSettings,
    Message,
    Participant,
    Role,
    RunContext,
    RunState,
    Topology,
    agent_step,
    log_update,
    opening_messages,
    register_system,
    run_tool_calls,
)
from mas.llm.tool_calls import ToolCallRequest

SOLVER_ROLE = Role(name="solver", brief="You are a careful problem solver working alone.")
SOLVER = SOLVER_ROLE.agent("solver")


class SASState(RunState, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    pending_tools: list[dict[str, Any]]
    tool_iterations: int
    notes_seen: int
    """How many ``notes`` the agent has been shown."""


def build_sas(rt: RunContext):
    """Compile-ready SAS graph builder for one run.

    >>> # build_sas(rt).compile(checkpointer=saver).ainvoke({}, config)
    """
    solver = rt.specialise(SOLVER)

    async def agent(state: SASState) -> dict[str, Any]:
        history = list(state.get("messages") or [])
        notes = state.get("notes") or []
        unseen = notes[state.get("notes_seen", 0):]
        # the tools' schemas and descriptions only: nothing is called on this copy
        toolbox = rt.toolbox(rt.new_environment() if rt.new_environment else None)
        if not history:
            new: list[AnyMessage] = opening_messages(rt, solver, "\n".join(unseen), toolbox)
        else:
            new = [HumanMessage(n) for n in unseen]
        history += new
        allow = state.get("tool_iterations", 0) < rt.cfg.mas.max_tool_iterations
        out = await agent_step(rt, solver, history, answer_event="finalize", allow_tools=allow, toolbox=toolbox)
        update: dict[str, Any] = {"messages": new + out.new_messages, "steps_done": 1, "notes_seen": len(notes)}
        if out.answer is not None:
            update["answer"] = out.answer.to_dict()
            update["pending_tools"] = []
        else:
            update["pending_tools"] = [
                {"name": c.name, "arguments": c.arguments, "id": c.id, "protocol": c.protocol, "invalid": c.invalid}
                for c in out.tool_calls
            ]
        return update

    async def tools(state: SASState) -> dict[str, Any]:
        calls = [ToolCallRequest(**c) for c in state.get("pending_tools") or []]
        env = rt.environment(state.get("envs"), MAIN)
        runs = await run_tool_calls(rt, solver, calls, toolbox=rt.toolbox(env))
        return {"messages": [r.message for r in runs], "pending_tools": [],
                "tool_iterations": state.get("tool_iterations", 0) + 1, **log_update(MAIN, env)}

    async def route(state: SASState) -> str:
        return "tools" if state.get("pending_tools") else END

    g = StateGraph(SASState)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g


def agent_graph(mas: MasSettings) -> AgentGraph:
    """The solver and its tools (no messages between agents)."""
    return AgentGraph(
        participants=(Participant(name=SOLVER.name, role=SOLVER.role, row=0), Participant(name=TOOLS_NODE, row=1)),
        messages=(Message(source=SOLVER.name, target=TOOLS_NODE, label="tool calls"),
                  Message(source=TOOLS_NODE, target=SOLVER.name, label="results", dashed=True)))


TOPOLOGY = register_system(Topology(name="sas", build=build_sas, roles=(SOLVER_ROLE,), agents=agent_graph,
                                   single_agent=True,
                                   description="One agent: a solver with a tool loop (the baseline)."))
