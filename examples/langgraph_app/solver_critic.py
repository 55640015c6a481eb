"""A solver and a critic: a small multi-agent LangGraph app, written as any LangGraph user would write it.

Nothing here imports mas-econ. The solver answers the task; the critic reads the answer and either approves it or
says what is wrong, and the solver tries again (at most MAX_REVIEWS reviews). The app's answer is the solver's
last message; the critic's verdicts live in their own state key, so the conversation in `messages` is the task
and the solver's attempts.

`build(model)` returns the graph (uncompiled: whoever runs it compiles it with a checkpointer). It takes the chat
model its agents call, so the same app runs on any LangChain chat model:

    from langchain_openai import ChatOpenAI
    graph = build(ChatOpenAI(model="gpt-4o-mini")).compile()
    graph.invoke({"messages": [("user", "What is 17 * 23?")]})["messages"][-1].content
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

MAX_REVIEWS = 2

SOLVER_PROMPT = ("You solve math word problems. Think in a few short sentences, then end with one line: "
                 "'Final answer: <number>'.")
CRITIC_PROMPT = ("You check a proposed solution to a math word problem. Recompute it. If the final answer is "
                 "correct, reply with the single word APPROVED. Otherwise say in one sentence what is wrong.")


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    critique: str
    reviews: int


def build(model: BaseChatModel) -> StateGraph:
    """The solver-critic graph, its two agents calling ``model``."""

    async def solver(state: State) -> State:
        prompt = [SystemMessage(SOLVER_PROMPT), *state["messages"]]
        if state.get("critique"):
            prompt.append(HumanMessage(f"A reviewer found a problem: {state['critique']}\nSolve the problem again."))
        return {"messages": [await model.ainvoke(prompt)]}

    async def critic(state: State) -> State:
        task, attempt = state["messages"][0].content, state["messages"][-1].content
        reply = await model.ainvoke([SystemMessage(CRITIC_PROMPT),
                                     HumanMessage(f"Problem:\n{task}\n\nProposed solution:\n{attempt}")])
        verdict = str(reply.content).strip()
        approved = verdict.upper().startswith("APPROVED")
        return {"critique": "" if approved else verdict, "reviews": state.get("reviews", 0) + 1}

    def after_review(state: State) -> str:
        return "solver" if state.get("critique") and state.get("reviews", 0) < MAX_REVIEWS else END

    graph = StateGraph(State)
    graph.add_node("solver", solver)
    graph.add_node("critic", critic)
    graph.add_edge(START, "solver")
    graph.add_edge("solver", "critic")
    graph.add_conditional_edges("critic", after_review, ["solver", END])
    return graph
