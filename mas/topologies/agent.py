"""An agent's step and turn: one LLM call, its tool calls, and the trace events.

A *step* is one LLM output of one agent and is one trajectory step in the
trace (``payload.step_index``). A *turn* is steps plus tool executions until
the agent answers. The SAS graph runs each step as its own node, so every
step has a checkpoint to resume from; multi-agent stages run whole turns.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from descriptor.events import AgentOutput, EventType, ToolCall, ToolResult
from mas.config import ExperimentConfig
from mas.llm.call import ToolCallRequest, call_llm, clip_confidence, llm_event_fields
from mas.llm.models import ModelSet
from mas.tools.builtin import TOOLS, execute_tool
from mas.topologies.prompts import ANSWER_SCHEMA, force_answer_note, system_prompt, task_message, tool_result_message
from mas.tracing import Stopwatch, current_tracer

CONTENT_LIMIT = 4000
"""Characters of model output kept in a trace event."""


@dataclass(kw_only=True, frozen=True, slots=True)
class AgentSpec:
    """Who an agent is: actor name, structural role, optional persona, tool access."""

    name: str
    role: str
    persona: str | None = None
    tools: bool = True


@dataclass(kw_only=True, slots=True)
class RunContext:
    """What every node of one run needs; built by the runner, closed over by graph builders."""

    cfg: ExperimentConfig
    models: ModelSet
    question: str
    answer_kind: str = "text"


@dataclass(kw_only=True, slots=True)
class Answer:
    """An agent's answer artifact."""

    answer_artifact: str
    confidence: float
    reasoning: str = ""
    parse: str = "json"
    """``json``, ``salvaged``, ``tool_call_as_answer`` or ``fallback`` (see :func:`parse_answer`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"answer_artifact": self.answer_artifact, "confidence": self.confidence,
                "reasoning": self.reasoning, "parse": self.parse}


@dataclass(kw_only=True, slots=True)
class StepOutcome:
    answer: Answer | None
    tool_calls: list[ToolCallRequest]
    new_messages: list[BaseMessage] = field(default_factory=list)


def state_id_of(config: RunnableConfig | None) -> str | None:
    """The top-level checkpoint a node runs from (its resumable point)."""
    if not config:
        return None
    return (config.get("configurable", {}).get("checkpoint_map") or {}).get("")


def opening_messages(rt: RunContext, agent: AgentSpec, extra: str = "") -> list[BaseMessage]:
    """System prompt plus the task (and any relay packets selected for this agent)."""
    content = task_message(rt.question) + (f"\n\n{extra}" if extra else "")
    return [SystemMessage(system_prompt(agent.role, persona=agent.persona, tools=agent.tools,
                                        answer_kind=rt.answer_kind)),
            HumanMessage(content)]


_ARTIFACT_RE = re.compile(r'"answer_artifact"\s*:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)
_CALL_SHAPE_RE = re.compile(r'^\s*(```(?:json)?\s*)?\{\s*"name"\s*:\s*"[^"]*"\s*,\s*"arguments"\s*:', re.DOTALL)


def parse_answer(parsed: dict[str, Any] | None, text: str) -> Answer:
    """Answer from the reply's JSON, else a salvage, else the whole reply (each recorded in ``parse``).

    Small models cut their JSON short at the token limit (``salvaged``: the
    ``answer_artifact`` field read from the broken JSON) or write a tool call
    where an answer is due (``tool_call_as_answer``: an empty artifact, so
    votes and the controller see no answer rather than tool-call JSON).
    """
    if parsed:
        art = parsed.get("answer_artifact", parsed.get("answer", parsed.get("final_answer")))
        if art is not None:
            return Answer(answer_artifact=str(art).strip(), confidence=clip_confidence(parsed.get("confidence")),
                          reasoning=str(parsed.get("reasoning", ""))[:2000], parse="json")
    found = _ARTIFACT_RE.search(text)
    if found:
        try:
            artifact = json.loads(f'"{found.group(1)}"')
        except ValueError:
            artifact = found.group(1)
        return Answer(answer_artifact=str(artifact).strip(), confidence=0.5, parse="salvaged")
    if _CALL_SHAPE_RE.match(text):
        return Answer(answer_artifact="", confidence=0.0, parse="tool_call_as_answer")
    return Answer(answer_artifact=text.strip(), confidence=0.5, parse="fallback")


async def agent_step(
    rt: RunContext,
    agent: AgentSpec,
    history: list[BaseMessage],
    *,
    answer_event: EventType = "finalize",
    allow_tools: bool = True,
    sends: list[dict[str, str]] | None = None,
    state_id: str | None = None,
    payload: dict[str, Any] | None = None,
) -> StepOutcome:
    """One LLM call of ``agent``; traces a ``tool_call`` or an answer event as one trajectory step."""
    tracer = current_tracer()
    bound = rt.models.for_role(agent.role)
    use_tools = allow_tools and agent.tools
    messages = history if use_tools or not agent.tools else [*history, HumanMessage(force_answer_note())]
    res = await call_llm(bound, messages, contract="agent.turn", actor=agent.name, step=tracer.next_step,
                         tools=TOOLS if use_tools else None, json_schema=None if use_tools else ANSWER_SCHEMA,
                         metadata={"mas_role": agent.role})
    # A native tool call has no text; its rendering is what the step said.
    content = res.text or "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in res.tool_calls)
    common = {"role": agent.role, "content": content[:CONTENT_LIMIT], "persona": agent.persona, **(payload or {})}
    if res.tool_calls:
        for i, call in enumerate(res.tool_calls):
            tracer.emit(agent.name, "tool_call", ToolCall(
                **common, tool=call.name, arguments=call.arguments, tool_call_id=call.id,
                tool_protocol=call.protocol,
            ), state_id=state_id, step=i == 0, **(llm_event_fields(res) if i == 0 else {}))
        return StepOutcome(answer=None, tool_calls=res.tool_calls,
                           new_messages=[res.message if res.tool_calls[0].protocol == "native"
                                         else AIMessage(content=res.text)])
    answer = parse_answer(res.parsed, res.text)
    tracer.emit(agent.name, answer_event, AgentOutput(**common, **answer.to_dict(), sends=sends), state_id=state_id,
                step=True, **llm_event_fields(res))
    return StepOutcome(answer=answer, tool_calls=[], new_messages=[AIMessage(content=res.text)])


async def run_tool_calls(rt: RunContext, agent: AgentSpec, calls: list[ToolCallRequest],
                         state_id: str | None = None) -> list[BaseMessage]:
    """Execute the calls, trace a ``tool_result`` each, and return the messages the agent sees next."""
    tracer = current_tracer()
    out: list[BaseMessage] = []
    for call in calls:
        with Stopwatch() as sw:
            res = await execute_tool(call.name, call.arguments, rt.cfg.sandbox)
        tracer.emit(agent.name, "tool_result", ToolResult(
            tool=call.name, ok=res.ok, output=res.output[:CONTENT_LIMIT], tool_call_id=call.id,
            tool_protocol=call.protocol,
        ), start=sw.start, end=sw.end, latency_ms=sw.ms, state_id=state_id)
        if call.protocol == "native":
            out.append(ToolMessage(content=res.output, tool_call_id=call.id, name=call.name))
        else:
            out.append(HumanMessage(tool_result_message(call.name, res.ok, res.output)))
    return out


async def agent_turn(
    rt: RunContext,
    agent: AgentSpec,
    history: list[BaseMessage],
    *,
    answer_event: EventType = "act",
    sends: list[dict[str, str]] | None = None,
    state_id: str | None = None,
    payload: dict[str, Any] | None = None,
) -> tuple[Answer, list[BaseMessage]]:
    """Steps and tool calls until the agent answers (at most ``mas.max_tool_iterations`` tool rounds)."""
    history = list(history)
    for iteration in range(rt.cfg.mas.max_tool_iterations + 1):
        allow = iteration < rt.cfg.mas.max_tool_iterations
        step = await agent_step(rt, agent, history, answer_event=answer_event, allow_tools=allow,
                                sends=sends, state_id=state_id, payload=payload)
        history += step.new_messages
        if step.answer is not None:
            return step.answer, history
        history += await run_tool_calls(rt, agent, step.tool_calls, state_id)
    raise AssertionError("unreachable: the last iteration forbids tools")
