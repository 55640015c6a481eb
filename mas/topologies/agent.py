"""An agent's step and turn: one LLM call, its tool calls, and the trace events (the one implementation).

A *step* (:func:`agent_step`) is one LLM output of one agent and is one
trajectory step in the trace (``payload.step_index``). A *turn*
(:func:`agent_turn`) is steps plus tool executions until the agent answers
(or routes, for the supervisor). The SAS graph runs each step as its own
node, so every step has a checkpoint to resume from; multi-agent stages run
whole turns.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from descriptor.events import AgentOutput, Event, EventType, ToolCall, ToolResult
from mas.config import ExperimentConfig
from mas.llm.call import LLMResult, call_llm, llm_event_fields
from mas.llm.tool_calls import ToolCallRequest
from mas.llm.injection import INJECTED_KEY, InjectionPlan
from mas.llm.confidence import Scale, parse_confidence
from mas.llm.models import ModelSet
from mas.topologies.environment import (
    MAIN,
    ActionLog,
    EnvironmentFactory,
    branch_environment,
)
from mas.topologies.node import state_id_of
from mas.topologies.prompts import (
    GENERIC_BRIEF,
    answer_schema as _answer_schema,
    force_answer_note,
    system_prompt,
    task_message,
    tool_result_message,
)
from mas.topologies.termination import MISSING_CONFIDENCE
from mas.topologies.toolbox import Toolbox, ToolOutput, toolbox_for
from mas.tracing import Stopwatch, current_tracer

CONTENT_LIMIT = 4000
"""Characters of model output kept in a trace event."""


@dataclass(kw_only=True, frozen=True, slots=True)
class AgentSpec:
    """Who an agent is: actor name, structural role (and its brief), optional persona, tool access.

    Topologies make agents from their declared roles (:meth:`mas.topologies.declaration.Role.agent`).
    """

    name: str
    role: str
    brief: str = GENERIC_BRIEF
    """The role's brief, the first paragraph of the agent's system prompt."""
    persona: str | None = None
    tools: bool = True


@dataclass(kw_only=True, slots=True)
class RunContext:
    """What every node of one run needs; built by the runner, closed over by graph builders."""

    cfg: ExperimentConfig
    models: ModelSet
    question: str
    answer_kind: str = "text"
    new_environment: EnvironmentFactory | None = None
    """A fresh environment of the run's task (benchmarks solved by acting); None: the built-in tools."""
    personas: dict[str, str] | None = None
    """Generated personas by agent (``mas.persona_mode = "generated"``); None: static ones."""
    injection: InjectionPlan | None = None
    """The run's planned wrong step (a provider carries it out); its record gets the step index the injected
    output got."""
    limit_reached: str | None = None
    """The budget (``limits.<kind>``) that stopped the run, if one did."""
    system_options: dict[str, Any] = field(default_factory=dict)
    """Options the sweep chose for this run's system (``sas_matched``'s matched ``k``), recorded in its metadata."""
    task_id: str = ""
    """The benchmark's id of the run's task (what draws a judge's candidate order, with the run's seed)."""

    def specialise(self, agent: AgentSpec) -> AgentSpec:
        """``agent`` with its generated persona, if the run has one for it."""
        persona = (self.personas or {}).get(agent.name)
        return agent if persona is None else dataclasses.replace(agent, persona=persona)

    def with_models(self, models: ModelSet) -> RunContext:
        """A copy of this context calling ``models`` (a graph compiled once holds a stand-in, not this object:
        copy through here, not with ``dataclasses.replace``)."""
        return dataclasses.replace(self, models=models)

    def toolbox(self, environment: Any = None) -> Toolbox:
        """The tools of an agent acting on ``environment`` (None: the built-in calculator and Python)."""
        return toolbox_for(self.cfg.sandbox, environment, builtin=self.cfg.mas.builtin_tools)

    def environment(self, envs: dict[str, ActionLog] | None, branch: str, base: str = MAIN) -> Any:
        """Branch ``branch`` of the run's environment rebuilt from graph state (forked from ``base`` when new);
        None when the run has no environment (see :mod:`mas.topologies.environment`)."""
        return branch_environment(self.new_environment, envs, branch, base)


@dataclass(kw_only=True, slots=True)
class Answer:
    """An agent's answer artifact."""

    answer_artifact: str
    confidence: float
    reasoning: str = ""
    parse: str = "json"
    """``json``, ``salvaged``, ``tool_call_as_answer``, ``boxed`` or ``fallback`` (see :func:`parse_answer`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"answer_artifact": self.answer_artifact, "confidence": self.confidence,
                "reasoning": self.reasoning, "parse": self.parse}


@dataclass(kw_only=True, slots=True)
class StepOutcome:
    """One step's result: an answer, or the tool calls to execute (and the routing calls to route)."""

    answer: Answer | None
    tool_calls: list[ToolCallRequest]
    routing_calls: list[ToolCallRequest] = field(default_factory=list)
    new_messages: list[BaseMessage] = field(default_factory=list)
    parsed: dict[str, Any] | None = None
    """The answer reply's JSON object, when it had one (fields beyond the answer's)."""


def opening_messages(rt: RunContext, agent: AgentSpec, extra: str = "", toolbox: Toolbox | None = None,
                     ) -> list[BaseMessage]:
    """System prompt plus the task (and any relay packets selected for this agent).

    ``toolbox``: the agent's tools (default: the built-in ones), described in the system prompt.
    """
    content = task_message(rt.question) + (f"\n\n{extra}" if extra else "")
    protocol = (toolbox or rt.toolbox()).protocol if agent.tools else None
    return [SystemMessage(system_prompt(agent.brief, persona=agent.persona, tool_protocol=protocol,
                                        answer_kind=rt.answer_kind)),
            HumanMessage(content)]


_ARTIFACT_RE = re.compile(r'"answer_artifact"\s*:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)
# The last \boxed{...} of a reply (one level of nested braces, as in \boxed{\frac{1}{2}}).
_BOXED_RE = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_CALL_SHAPE_RE = re.compile(r'^\s*(```(?:json)?\s*)?\{\s*"name"\s*:\s*"[^"]*"\s*,\s*"arguments"\s*:', re.DOTALL)


def parse_answer(parsed: dict[str, Any] | None, text: str, confidence_scale: Scale = "clip", *,
                 cut: bool = False) -> Answer:
    """Answer from the reply's JSON, else a salvage, else the whole reply (each recorded in ``parse``).

    The JSON's ``confidence`` is read on ``confidence_scale`` (``mas.confidence_scale``; default the harness
    README's rule: clipped into [0, 1], 0.5 when missing or unparsable).

    ``cut``: the reply ended at the call's ``max_tokens``. Without a complete answer field in it, it has no answer
    (``cut_at_max_tokens``): a reply that loops until the limit would otherwise be graded by whatever its text
    ends with, e.g. its last number.

    Small models cut their JSON short at the token limit (``salvaged``: the
    ``answer_artifact`` field read from the broken JSON) or write a tool call
    where an answer is due (``tool_call_as_answer``: an empty artifact, so
    votes and the controller see no answer rather than tool-call JSON). A
    reply without JSON that marks its answer ``\\boxed{...}`` answers the
    last box's content (``boxed``); any other is the whole reply (``fallback``).

    >>> parse_answer(None, "6 + 12 = 18, so the answer is \\\\boxed{18}").answer_artifact
    '18'
    """
    if parsed:
        art = parsed.get("answer_artifact", parsed.get("answer", parsed.get("final_answer")))
        if art is not None:
            confidence = parse_confidence(parsed.get("confidence"), MISSING_CONFIDENCE, confidence_scale)
            return Answer(answer_artifact=str(art).strip(), confidence=confidence,
                          reasoning=str(parsed.get("reasoning", ""))[:2000], parse="json")
    found = _ARTIFACT_RE.search(text)
    if found:
        try:
            artifact = json.loads(f'"{found.group(1)}"')
        except ValueError:
            artifact = found.group(1)
        return Answer(answer_artifact=str(artifact).strip(), confidence=MISSING_CONFIDENCE, parse="salvaged")
    if _CALL_SHAPE_RE.match(text):
        return Answer(answer_artifact="", confidence=MISSING_CONFIDENCE, parse="tool_call_as_answer")
    if cut:
        return Answer(answer_artifact="", confidence=MISSING_CONFIDENCE, parse="cut_at_max_tokens")
    if boxed := _BOXED_RE.findall(text):
        return Answer(answer_artifact=boxed[-1].strip(), confidence=MISSING_CONFIDENCE, parse="boxed")
    return Answer(answer_artifact=text.strip(), confidence=MISSING_CONFIDENCE, parse="fallback")


def cut_at_limit(message: BaseMessage) -> bool:
    """Whether the reply stopped at the call's ``max_tokens`` (the provider's ``finish_reason`` ``length``)."""
    return message.response_metadata.get("finish_reason") == "length"


def _render_calls(calls: Sequence[ToolCallRequest]) -> str:
    """What a reply made of native tool calls said (it has no text)."""
    return "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in calls)


async def agent_step(
    rt: RunContext,
    agent: AgentSpec,
    history: list[BaseMessage],
    *,
    answer_event: EventType | Callable[[Answer], EventType] = "act",
    allow_tools: bool = True,
    route_tools: Sequence[Any] = (),
    on_route: Callable[[ToolCallRequest], dict[str, Any]] | None = None,
    sends: list[dict[str, str]] | None = None,
    state_id: str | None = None,
    payload: dict[str, Any] | None = None,
    contract: str = "agent.turn",
    toolbox: Toolbox | None = None,
    answer_schema: dict[str, Any] | None = None,
    redo_revise: bool = False,
    hints: Mapping[str, Any] | None = None,
) -> StepOutcome:
    """One LLM call of ``agent`` and its trace events: a ``tool_call`` per call, or the answer event.

    The reply is one trajectory step (its first event carries ``step_index``).
    ``answer_event`` is the answer's event type, or a function choosing it
    from the answer (``revise`` when an agent changed its mind). A call to one
    of ``route_tools`` is a routing call (a handoff): it is traced with
    ``on_route(call)``'s extra payload (``sends``, ``handoff``) and returned
    in ``routing_calls`` for the graph to route, never executed here.
    ``toolbox``: the agent's tools (default: the built-in ones).
    ``answer_schema``: the JSON the answer must follow (it must hold
    ``answer_artifact``; further fields come back in ``StepOutcome.parsed``;
    default: :func:`~mas.topologies.prompts.answer_schema` with ``mas.reasoning_max_chars``).
    ``redo_revise``: a ``revise`` answer redoes earlier work (a revise after a
    critique) and is marked ``payload.redo``. ``hints``: facts the caller
    knows about this call (the roster, the reports shown), sent as invoke
    metadata (``metadata["hints"]``) for a test double to read instead of the
    prompt's prose; no real model sees them. ``state_id``: the checkpoint the
    events name (default: the running node's, :func:`~mas.topologies.node.state_id_of`). Raises
    :class:`~mas.llm.call.LLMCallError` when the call fails for good.
    """
    tracer = current_tracer()
    state_id = state_id_of() if state_id is None else state_id
    own_tools = (toolbox or rt.toolbox()).tools if agent.tools else ()
    tools = [*own_tools, *route_tools] if allow_tools else []
    # an agent with tools that may not use them any more is told to answer now
    messages = history if tools or not own_tools else [*history, HumanMessage(force_answer_note())]
    if answer_schema is None:
        answer_schema = _answer_schema(rt.cfg.mas.reasoning_max_chars)
    res = await call_llm(rt.models.for_role(agent.role), messages, contract=contract, actor=agent.name,
                         step=tracer.next_step, tools=tools or None, json_schema=None if tools else answer_schema,
                         metadata={"mas_role": agent.role, **({"hints": dict(hints)} if hints else {})})
    common = {"role": agent.role, "content": (res.text or _render_calls(res.tool_calls))[:CONTENT_LIMIT],
              "persona": agent.persona, **(payload or {})}
    if res.tool_calls:
        route_names = {t.name for t in route_tools}
        routing = [c for c in res.tool_calls if c.name in route_names]
        first = None
        for i, call in enumerate(res.tool_calls):
            extra = on_route(call) if routing and on_route is not None else {}
            ev = tracer.emit(agent.name, "tool_call", ToolCall(
                **common, tool=call.name, arguments=call.arguments, tool_call_id=call.id,
                tool_protocol=call.protocol, **extra,
            ), state_id=state_id, step=i == 0, **(llm_event_fields(res) if i == 0 else {}))
            first = ev if i == 0 else first
        _record_injection(rt, res, first)
        reply = res.message if res.tool_calls[0].protocol == "native" else AIMessage(content=res.text)
        return StepOutcome(answer=None, tool_calls=res.tool_calls, routing_calls=routing, new_messages=[reply])
    answer = parse_answer(res.parsed, res.text, rt.cfg.mas.confidence_scale, cut=cut_at_limit(res.message))
    event_type = answer_event(answer) if callable(answer_event) else answer_event
    redo = True if redo_revise and event_type == "revise" else None
    ev = tracer.emit(agent.name, event_type, AgentOutput(**common, **answer.to_dict(), sends=sends, redo=redo),
                     state_id=state_id, step=True, **llm_event_fields(res))
    _record_injection(rt, res, ev)
    return StepOutcome(answer=answer, tool_calls=[], new_messages=[AIMessage(content=res.text)], parsed=res.parsed)


def _record_injection(rt: RunContext, res: LLMResult, event: Event | None) -> None:
    """Point the injection record at the step index the injected output actually got.

    Parallel branches ask the model with the step counter of the moment, but
    their steps are numbered in emit order; the record must name the latter.
    """
    plan = rt.injection
    if (event is not None and plan is not None and plan.fired_at is not None
            and res.message.response_metadata.get(INJECTED_KEY)):
        plan.fired_at["step"] = event.step_index


@dataclass(kw_only=True, frozen=True, slots=True)
class ToolRun:
    """One executed tool call: the request, what the tool returned, and the message the agent sees next."""

    call: ToolCallRequest
    ok: bool
    output: str
    message: BaseMessage

    def line(self) -> str:
        """``tool(args) -> output`` as an agent's artifact keeps it."""
        return f"{self.call.name}({json.dumps(self.call.arguments)}) -> {self.output[:300]}"


async def run_tool_calls(rt: RunContext, agent: AgentSpec, calls: list[ToolCallRequest],
                         state_id: str | None = None, toolbox: Toolbox | None = None) -> list[ToolRun]:
    """Execute the calls and trace a ``tool_result`` each; a failed call is ``ok=False``, never an exception.

    ``toolbox``: the agent's tools (default: the built-in ones); on an
    environment, ``state_changing`` marks the calls that changed its state.
    """
    tracer = current_tracer()
    state_id = state_id_of() if state_id is None else state_id
    box = toolbox or rt.toolbox()
    out: list[ToolRun] = []
    for call in calls:
        with Stopwatch() as sw:
            res = (ToolOutput(ok=False, output=f"error: {call.invalid}") if call.invalid is not None
                   else await box.run(call.name, call.arguments))
        output = res.output[:CONTENT_LIMIT]
        tracer.emit(agent.name, "tool_result", ToolResult(
            tool=call.name, ok=res.ok, output=output, tool_call_id=call.id, tool_protocol=call.protocol,
            state_changing=res.state_changing,
        ), start=sw.start, end=sw.end, latency_ms=sw.ms, state_id=state_id)
        message: BaseMessage = (ToolMessage(content=output, tool_call_id=call.id, name=call.name)
                                if call.protocol == "native"
                                else HumanMessage(tool_result_message(call.name, res.ok, output)))
        out.append(ToolRun(call=call, ok=res.ok, output=output, message=message))
    return out


@dataclass(kw_only=True, slots=True)
class TurnResult:
    """What one turn produced: the answer (None after a routing call) and its steps."""

    answer: Answer | None
    steps: int
    """Trajectory steps the turn emitted."""
    tool_results: list[str] = field(default_factory=list)
    """``tool(args) -> output`` lines of the tool calls this turn made."""
    routing_calls: list[ToolCallRequest] = field(default_factory=list)
    history: list[BaseMessage] = field(default_factory=list)
    """The conversation at the end of the turn."""
    parsed: dict[str, Any] | None = None
    """The answer reply's JSON object, when it had one."""


async def agent_turn(
    rt: RunContext,
    agent: AgentSpec,
    history: list[BaseMessage],
    *,
    answer_event: EventType | Callable[[Answer], EventType] = "act",
    route_tools: Sequence[Any] = (),
    on_route: Callable[[ToolCallRequest], dict[str, Any]] | None = None,
    sends: list[dict[str, str]] | None = None,
    state_id: str | None = None,
    payload: dict[str, Any] | None = None,
    contract: str = "agent.turn",
    toolbox: Toolbox | None = None,
    answer_schema: dict[str, Any] | None = None,
    redo_revise: bool = False,
    hints: Mapping[str, Any] | None = None,
) -> TurnResult:
    """Steps (:func:`agent_step`) and tool calls until the agent answers or routes.

    At most ``mas.max_tool_iterations`` rounds of tool calls; the last step
    offers no tools. A routing call ends the turn (the caller routes). A
    call that fails for good raises :class:`~mas.llm.call.LLMCallError`: the
    run ends as an infrastructure error (no topology carries on with a branch
    missing), see :mod:`mas.sweep.runner`.
    """
    history = list(history)
    results: list[str] = []
    max_iter = rt.cfg.mas.max_tool_iterations
    for iteration in range(max_iter + 1):
        step = await agent_step(rt, agent, history, answer_event=answer_event, allow_tools=iteration < max_iter,
                                route_tools=route_tools, on_route=on_route, sends=sends, state_id=state_id,
                                payload=payload, contract=contract, toolbox=toolbox, answer_schema=answer_schema,
                                redo_revise=redo_revise, hints=hints)
        history += step.new_messages
        if step.answer is not None or step.routing_calls:
            return TurnResult(answer=step.answer, steps=iteration + 1, tool_results=results,
                              routing_calls=step.routing_calls, history=history, parsed=step.parsed)
        runs = await run_tool_calls(rt, agent, step.tool_calls, state_id, toolbox)
        history += [r.message for r in runs]
        results += [r.line() for r in runs]
    raise AssertionError("unreachable: the last iteration offers no tools")
