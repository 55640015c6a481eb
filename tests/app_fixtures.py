"""LangGraph apps as a user writes them (nothing of mas-econ imported), run as application systems by the tests
(``app:tests.app_fixtures:<factory>``)."""

from __future__ import annotations

from typing import Annotated, TypedDict

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition


def two_node(model):
    """A planner and a solver, async nodes calling the chat model they are given."""

    async def planner(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke([SystemMessage("Plan the work."), *state["messages"]])]}

    async def solver(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke([SystemMessage("Solve the task."), *state["messages"]])]}

    g = StateGraph(MessagesState)
    g.add_node("planner", planner)
    g.add_node("solver", solver)
    g.add_edge(START, "planner")
    g.add_edge("planner", "solver")
    g.add_edge("solver", END)
    return g


WRITER_REPLY = "A first draft: 12"
CRITIC_REPLY = "Checked the draft. Final answer: 13"


def own_models():
    """A writer (a plain ``def`` node, run in a worker thread) and a critic, each with a fake chat model of its own;
    the critic's reply reports its usage, the writer's does not."""
    writer = FakeMessagesListChatModel(responses=[AIMessage(WRITER_REPLY)])
    critic = FakeMessagesListChatModel(responses=[AIMessage(CRITIC_REPLY, usage_metadata={
        "input_tokens": 31, "output_tokens": 7, "total_tokens": 38})])

    def write(state: MessagesState) -> dict:
        return {"messages": [writer.invoke(state["messages"])]}

    async def review(state: MessagesState) -> dict:
        return {"messages": [await critic.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("writer", write)
    g.add_node("critic", review)
    g.add_edge(START, "writer")
    g.add_edge("writer", "critic")
    g.add_edge("critic", END)
    return g


@tool
def calculator(expression: str) -> str:
    """Evaluate one arithmetic expression (numbers, + - * and parentheses)."""
    if set(expression) - set("0123456789+-*() "):
        raise ValueError(f"not an arithmetic expression: {expression!r}")
    return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 - digits and operators only, checked above


def tool_loop(model):
    """A ReAct loop compiled by the app itself: a plain ``def`` solver with the calculator bound, and a ToolNode."""
    llm = model.bind_tools([calculator])

    def solver(state: MessagesState) -> dict:
        return {"messages": [llm.invoke([SystemMessage("Use the calculator."), *state["messages"]])]}

    g = StateGraph(MessagesState)
    g.add_node("solver", solver)
    g.add_node("tools", ToolNode([calculator]))
    g.add_edge(START, "solver")
    g.add_conditional_edges("solver", tools_condition)
    g.add_edge("tools", "solver")
    return g.compile()


class Keyed(TypedDict, total=False):
    question: str
    final: str
    messages: Annotated[list[AnyMessage], add_messages]


def keyed(model):
    """The task in ``question``, the answer in ``final`` (a string), a conversation beside them in ``messages``."""

    async def answer(state: Keyed) -> dict:
        reply = await model.ainvoke([HumanMessage(state["question"])])
        return {"final": str(reply.content), "messages": [AIMessage("not the answer: 0")]}

    g = StateGraph(Keyed)
    g.add_node("answerer", answer)
    g.add_edge(START, "answerer")
    g.add_edge("answerer", END)
    return g


def not_a_graph():
    return {"nodes": ["planner", "solver"]}


class Plain(TypedDict):
    question: str
    result: str


def no_messages():
    g = StateGraph(Plain)
    g.add_node("solve", lambda state: {"result": "4"})
    g.add_edge(START, "solve")
    g.add_edge("solve", END)
    return g


def raises(model):
    async def planner(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def broken(state: MessagesState) -> dict:
        raise ValueError("the app's own bug")

    g = StateGraph(MessagesState)
    g.add_node("planner", planner)
    g.add_node("broken", broken)
    g.add_edge(START, "planner")
    g.add_edge("planner", "broken")
    g.add_edge("broken", END)
    return g
