"""An application system's run traced through LangChain callbacks: one handler per run, attached to the graph.

The handler sees every chat model call, tool run and error under the graph, whatever made it, and writes the
same events a built-in system's agents write (:func:`mas.topologies.agent.agent_step`,
:func:`~mas.topologies.agent.run_tool_calls`): a model reply is one trajectory step, an ``act`` event with the
reply read as an answer (:func:`~mas.topologies.agent.parse_answer`), or a ``tool_call`` event per call it asks
for (the first one the step); a tool run is a ``tool_result`` event of the agent that asked for it. Each carries
tokens, latency and cost, the agent, and the top-level checkpoint its node ran from (``state_id``: where a
rollback resumes).

The agent of a call is the name the call gives itself, when it gives one (a run name,
``model.with_config(run_name="critic")``, or the model's ``name``, ``ChatOpenAI(name="critic")``), else the
top-level LangGraph node that made it (``langgraph_node`` of a flat graph; of a node that is a subgraph, that
node's name, so a sub-agent built with ``create_react_agent`` is named for its node, not ``agent``).

Two kinds of model calls:

- the route's model (:class:`mas.apps.model.RouteChatModel`, what a factory taking ``model`` gets) asks the
  project's call layer (:func:`mas.llm.call.call_llm`: the route, retries, the response cache, budgets), which
  leaves its result here; the request that layer sends is its own and is not recorded twice;
- a model of the app's own is timed here; its tokens are the reply's usage (else estimated, characters / 4,
  ``usage_source: estimate``), its price that of a configured route naming the same model (else 0 USD), and
  the run's budgets are checked before it starts (:class:`~mas.llm.limits_run.RunLimitReached` stops the run).

A graph's synchronous nodes run in worker threads; everything the handler records is done on the run's event
loop (the thread waits), so the trace and the budget see one call at a time, as for a built-in system.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config

from descriptor.events import AgentOutput, ErrorInfo, ToolCall, ToolResult
from mas.llm.call import LLMResult, llm_event_fields, sane_usage
from mas.llm.injection import INJECTED_KEY
from mas.llm.jsonparse import parse_json_object
from mas.llm.limits_run import current_budget
from mas.llm.meter import METER
from mas.llm.tokens import estimate_tokens
from mas.llm.tool_calls import ToolCallRequest
from mas.topologies.agent import CONTENT_LIMIT, cut_at_limit, parse_answer, state_id_of
from mas.tracing import current_tracer, utc_now_iso

if TYPE_CHECKING:
    from mas.topologies.agent import RunContext

T = TypeVar("T")

ROUTE_MODEL_KEY = "mas_route_model"
"""Metadata key the route's model carries on its own calls (their events come from the call layer's result)."""
APP_AGENT = "app"
"""The agent of a call made outside any graph node and giving no name."""


def message_text(msg: BaseMessage) -> str:
    """The text of a message: its string content, or the text blocks of a list content joined."""
    content = msg.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def render_calls(calls: list[ToolCallRequest]) -> str:
    """What a reply made of tool calls only said."""
    return "; ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False, default=str)})" for c in calls)


def agent_of(serialized: dict[str, Any] | None, metadata: dict[str, Any], run_name: str | None) -> str:
    """The agent a call belongs to (see the module docstring).

    >>> model = {"name": "ChatOpenAI", "id": ["langchain", "chat_models", "ChatOpenAI"]}
    >>> inner = {"langgraph_node": "agent", "langgraph_checkpoint_ns": "researcher:1f0|agent:2a1"}
    >>> agent_of(model, inner, None), agent_of(model, inner, "critic"), agent_of({**model, "name": "judge"}, {}, None)
    ('researcher', 'critic', 'judge')
    """
    serialized = serialized or {}
    own = serialized.get("name")
    cls = (serialized.get("id") or [None])[-1]
    if run_name:
        return str(run_name)
    if isinstance(own, str) and own and own != cls:  # get_name() is the class name unless a name was given
        return own
    ns = metadata.get("langgraph_checkpoint_ns") or metadata.get("checkpoint_ns")
    if isinstance(ns, str) and (top := ns.split("|")[0].split(":")[0]):
        return top
    node = metadata.get("langgraph_node")
    return str(node) if node else APP_AGENT


def native_calls(msg: BaseMessage) -> list[ToolCallRequest]:
    """The tool calls a reply of the app's own model asks for (its ``tool_calls``; unreadable ones as invalid)."""
    calls = [ToolCallRequest(name=c["name"], arguments=dict(c.get("args") or {}), id=c.get("id") or "",
                             protocol="native") for c in getattr(msg, "tool_calls", None) or [] if c.get("name")]
    calls += [ToolCallRequest(name=c["name"], arguments={}, id=c.get("id") or "", protocol="native",
                              invalid=f"the arguments could not be read as a JSON object: {str(c.get('args'))[:200]!r}")
              for c in getattr(msg, "invalid_tool_calls", None) or [] if c.get("name")]
    return calls


@dataclass(kw_only=True, slots=True)
class CallRecord:
    """A model call in progress."""

    agent: str
    state_id: str | None
    route: bool
    """Made by the route's model: its figures come from the call layer."""
    start: str = field(default_factory=utc_now_iso)
    t0: float = field(default_factory=time.perf_counter)
    model: str | None = None
    prompt: str = ""
    """The prompt's text, for an estimate of its tokens when the reply reports none."""
    ticket: int | None = None


@dataclass(kw_only=True, slots=True)
class ToolRecord:
    """A tool run in progress."""

    agent: str
    tool: str
    tool_call_id: str | None
    protocol: str | None
    """How the call was asked for (``native``, ``text``); None: not by a traced reply."""
    state_id: str | None
    start: str = field(default_factory=utc_now_iso)
    t0: float = field(default_factory=time.perf_counter)


class AppRunHandler(BaseCallbackHandler):
    """The callbacks of one run of an application system (see the module docstring)."""

    run_inline = True  # in the caller's context: its node's config, the run's tracer and budget
    raise_error = True  # a budget reached stops the call, and so the run

    def __init__(self, rt: RunContext, loop: asyncio.AbstractEventLoop) -> None:
        self.rt = rt
        self.loop = loop
        self.calls: dict[UUID, CallRecord] = {}
        self.results: dict[UUID, LLMResult] = {}
        """The call layer's result of each route-model call, by the call's run id (left by the route's model)."""
        self.tools: dict[UUID, ToolRecord] = {}
        self.callers: dict[str, tuple[str, str]] = {}
        """Tool call id -> the agent that asked for it and the call's protocol (``native`` or ``text``)."""
        self.authors: dict[str, str] = {}
        """Reply message id -> its agent (names the final answer's author)."""
        self.last_author: str | None = None

    @property
    def ignore_chain(self) -> bool:
        return True

    @property
    def ignore_retriever(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    # ---------------------------------------------------------------- threads

    def on_loop(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the run's event loop, in the caller's context (a worker thread waits for it)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop or self.loop.is_closed():
            return fn()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        ctx = contextvars.copy_context()

        def go() -> None:
            try:
                done.set_result(ctx.run(fn))
            except BaseException as err:  # handed to the waiting thread, which raises it
                done.set_exception(err)

        self.loop.call_soon_threadsafe(go)
        return done.result()

    def wait_for(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the run's event loop from a worker thread (a synchronous node) and wait for it."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError("a synchronous call of the route's model inside an async node would block the run's "
                               "event loop: use `await model.ainvoke(...)` there")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    # ---------------------------------------------------------------- model calls

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start(serialized, messages[0] if messages else [], run_id, metadata or {}, kwargs)

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID,
                     metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        from langchain_core.messages import HumanMessage

        self._start(serialized, [HumanMessage(p) for p in prompts[:1]], run_id, metadata or {}, kwargs)

    def _start(self, serialized: dict[str, Any], messages: list[BaseMessage], run_id: UUID, meta: dict[str, Any],
               kwargs: dict[str, Any]) -> None:
        if meta.get("mas_actor") is not None:
            return  # the call layer's own request for the route's model: recorded by the call that asked
        params = kwargs.get("invocation_params") or {}
        rec = CallRecord(agent=agent_of(serialized, meta, kwargs.get("name")),
                         state_id=state_id_of(var_child_runnable_config.get()), route=bool(meta.get(ROUTE_MODEL_KEY)),
                         model=meta.get("ls_model_name") or params.get("model") or params.get("model_name")
                         or params.get("_type") or (serialized.get("id") or [None])[-1])
        if not rec.route:
            rec.prompt = "\n".join(message_text(m) for m in messages)
            self.on_loop(lambda: self._own_started(rec, run_id, messages))
        self.calls[run_id] = rec

    def _own_started(self, rec: CallRecord, run_id: UUID, messages: list[BaseMessage]) -> None:
        tracer = current_tracer()
        if (budget := current_budget()) is not None:
            budget.start(tracer)  # RunLimitReached when the run has used up a budget: the call is not made
        rec.ticket = METER.call_started()
        if tracer.enabled:
            from mas.spans import ambient_node

            tracer.chat_spans.started(ambient_node(), run_id, messages)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        rec = self.calls.pop(run_id, None)
        if rec is None:
            return
        gens = response.generations[0] if response.generations else []
        gen = gens[0] if gens else None
        msg = getattr(gen, "message", None)
        if not isinstance(msg, BaseMessage):
            msg = AIMessage(content=getattr(gen, "text", "") or "")
        if rec.route:
            res = self.results.pop(run_id, None)
            if res is not None:
                self.on_loop(lambda: self._reply(rec, msg, res.tool_calls, llm_event_fields(res), res))
            return
        self.on_loop(lambda: self._own_reply(rec, msg, getattr(response, "llm_output", None) or {}))

    def _own_reply(self, rec: CallRecord, msg: BaseMessage, llm_output: dict[str, Any]) -> None:
        usage = getattr(msg, "usage_metadata", None) or {}
        given = llm_output.get("token_usage") or llm_output.get("usage") or {}
        got_in = usage.get("input_tokens", given.get("prompt_tokens") if isinstance(given, dict) else None)
        got_out = usage.get("output_tokens", given.get("completion_tokens") if isinstance(given, dict) else None)
        calls = native_calls(msg)
        text = message_text(msg)
        token_in = token_out = None
        source = "estimate"
        if got_in or got_out:  # the reply's usage, each count not to believe estimated instead (as call_llm does)
            (token_in, token_out), absurd = sane_usage(got_in, got_out)
            source = "estimate" if absurd else "provider"
        if token_in is None:
            token_in = estimate_tokens(rec.prompt)
        if token_out is None:
            token_out = estimate_tokens(text + (render_calls(calls) if calls else ""))
        route_name, cost = self._price(rec.model, token_in, token_out)
        fields = {"start": rec.start, "end": utc_now_iso(), "token_in": token_in, "token_out": token_out,
                  "latency_ms": (time.perf_counter() - rec.t0) * 1000, "cost_usd": cost, "usage_source": source,
                  "model": rec.model, "route": route_name}
        self._own_finished(rec, token_in + token_out, cost)
        self._reply(rec, msg, calls, fields, None)

    def _own_finished(self, rec: CallRecord, tokens: int, cost: float) -> None:
        if rec.ticket is not None:
            METER.call_finished(rec.ticket, current_tracer().run_id, tokens)
        if (budget := current_budget()) is not None:
            budget.finish(tokens, cost)

    def _price(self, model: str | None, token_in: int, token_out: int) -> tuple[str | None, float]:
        """The configured route serving ``model`` (its name) and the call's price on it; (None, 0) when none does."""
        for name, route in self.rt.cfg.models.items():
            if model is not None and route.model == model:
                return name, route.cost_usd(token_in, token_out)
        return None, 0.0

    def _reply(self, rec: CallRecord, msg: BaseMessage, calls: list[ToolCallRequest], fields: dict[str, Any],
               res: LLMResult | None) -> None:
        """The events of one reply: a ``tool_call`` per call it asks for, or an ``act`` with its answer."""
        tracer = current_tracer()
        text = message_text(msg)
        common = {"role": rec.agent, "content": (text or render_calls(calls))[:CONTENT_LIMIT]}
        if calls:
            first = None
            for i, call in enumerate(calls):
                ev = tracer.emit(rec.agent, "tool_call", ToolCall(
                    **common, tool=call.name, arguments=call.arguments, tool_call_id=call.id or None,
                    tool_protocol=call.protocol), state_id=rec.state_id, step=i == 0, **(fields if i == 0 else {}))
                if call.id:
                    self.callers[call.id] = (rec.agent, call.protocol)
                first = ev if i == 0 else first
        else:
            answer = parse_answer(parse_json_object(text), text, cut=cut_at_limit(msg))
            first = tracer.emit(rec.agent, "act", AgentOutput(**common, **answer.to_dict()), state_id=rec.state_id,
                                step=True, **fields)
            self.last_author = rec.agent
        if msg.id:
            self.authors[msg.id] = rec.agent
        plan = self.rt.injection
        if (res is not None and first is not None and plan is not None and plan.fired_at is not None
                and res.message.response_metadata.get(INJECTED_KEY)):
            plan.fired_at["step"] = first.step_index  # the step index the injected output got, as agent_step does

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        rec = self.calls.pop(run_id, None)
        self.results.pop(run_id, None)
        if rec is None or rec.route:
            return  # the call layer traced the route's failed attempts itself

        def failed() -> None:
            self._own_finished(rec, 0, 0.0)
            current_tracer().emit(rec.agent, "error", ErrorInfo(
                kind="llm_call", error=f"{type(error).__name__}: {error}"[:500], will_retry=False),
                start=rec.start, latency_ms=(time.perf_counter() - rec.t0) * 1000, state_id=rec.state_id)

        self.on_loop(failed)

    # ---------------------------------------------------------------- tools

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, *, run_id: UUID,
                      metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        call_id = kwargs.get("tool_call_id")
        caller = self.callers.get(call_id) if call_id else None
        self.tools[run_id] = ToolRecord(
            agent=caller[0] if caller else agent_of(None, metadata or {}, None),
            tool=str((serialized or {}).get("name") or kwargs.get("name") or "tool"), tool_call_id=call_id,
            protocol=caller[1] if caller else None, state_id=state_id_of(var_child_runnable_config.get()))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        rec = self.tools.pop(run_id, None)
        if rec is None:
            return
        if isinstance(output, ToolMessage):
            ok, text = output.status != "error", message_text(output)
        else:
            ok, text = True, output if isinstance(output, str) else str(output)
        self.on_loop(lambda: self._tool_result(rec, ok, text))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        rec = self.tools.pop(run_id, None)
        if rec is not None:
            self.on_loop(lambda: self._tool_result(rec, False, f"error: {type(error).__name__}: {error}"))

    def _tool_result(self, rec: ToolRecord, ok: bool, output: str) -> None:
        current_tracer().emit(rec.agent, "tool_result", ToolResult(
            tool=rec.tool, ok=ok, output=output[:CONTENT_LIMIT], tool_call_id=rec.tool_call_id,
            tool_protocol=rec.protocol), start=rec.start, end=utc_now_iso(),
            latency_ms=(time.perf_counter() - rec.t0) * 1000, state_id=rec.state_id)
