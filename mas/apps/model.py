"""The route's chat model, as an application system's factory receives it (its ``model`` argument).

A LangChain chat model like any other to the app (``invoke``/``ainvoke``, ``bind_tools``, ``with_config``), whose
every call is made by the project's call layer (:func:`mas.llm.call.call_llm`) on the route of the run:
``--model``, each route of ``--models a,b``, the embedded default, or the agent's own route (``roles.<agent>``:
an app's agents are its nodes). So the response cache serves its calls, budgets stop them, retries are traced,
and a scripted run's injected error can land in them. The reply goes back to the app as an ``AIMessage`` (its
tool calls in ``tool_calls``) and is recorded by the run's handler (:mod:`mas.apps.handler`).

The model answers inside a run only: it takes the run's models and trace from the run's handler among the
call's callbacks. One object serves every run (a graph is built once per process).

On a route whose model writes tool calls as text (the embedded model), tools bound with ``bind_tools`` are
described in the system message and the history's tool calls and results are shown as that protocol's text;
the calls the model writes come back to the app as ``tool_calls`` all the same.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from mas.apps.handler import ROUTE_MODEL_KEY, AppRunHandler, message_text
from mas.llm.call import LLMResult, call_llm
from mas.llm.models import BoundModel
from mas.topologies.prompts import tool_result_message
from mas.tracing import current_tracer

APP_CONTRACT = "app.turn"
"""The contract the route's model's calls carry: an application's own prompt (the scripted double plays it as an
agent's turn)."""

TEXT_TOOL_PROTOCOL = """You can call these tools:
{tools}
To call a tool, end your reply with a JSON block like
```json
{{"name": "<tool name>", "arguments": {{"<argument>": "<value>"}}}}
```
and wait for its result. Make one call at a time and never invent tool results."""


class ToolSpec(dict):  # type: ignore[type-arg]
    """A tool as OpenAI's function schema (what ``bind_tools`` binds), with its ``name`` for the call layer."""

    @property
    def name(self) -> str:
        return str(self["function"]["name"])

    def line(self) -> str:
        """The tool in the text protocol's list: name, description, arguments."""
        fn = self["function"]
        props = (fn.get("parameters") or {}).get("properties") or {}
        args = {k: v.get("description") or v.get("type", "") for k, v in props.items() if isinstance(v, dict)}
        return f"- {fn['name']}: {fn.get('description', '')} Arguments: {json.dumps(args, ensure_ascii=False)}"


def tool_spec(tool: Any) -> ToolSpec:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return ToolSpec(convert_to_openai_tool(tool))


def as_text_protocol(messages: list[BaseMessage], specs: list[ToolSpec] | None) -> list[BaseMessage]:
    """``messages`` as a model writing tool calls as text sees them: tool calls as the text the model wrote, tool
    results as the messages :func:`~mas.topologies.prompts.tool_result_message` makes, and ``specs`` described
    in the system message."""
    out: list[BaseMessage] = []
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            text = message_text(m) or "\n".join(
                "```json\n" + json.dumps({"name": c["name"], "arguments": c.get("args") or {}}) + "\n```"
                for c in m.tool_calls)
            out.append(AIMessage(content=text))
        elif isinstance(m, ToolMessage):
            out.append(HumanMessage(tool_result_message(m.name or "tool", m.status != "error", message_text(m))))
        else:
            out.append(m)
    if specs:
        protocol = TEXT_TOOL_PROTOCOL.format(tools="\n".join(s.line() for s in specs))
        if out and isinstance(out[0], SystemMessage):
            out[0] = SystemMessage(f"{message_text(out[0])}\n\n{protocol}")
        else:
            out.insert(0, SystemMessage(protocol))
    return out


def reply_message(res: LLMResult) -> AIMessage:
    """What the app gets back: the reply, its tool calls (however the model wrote them) in ``tool_calls``, its
    usage in ``usage_metadata``."""
    usage = {"input_tokens": res.token_in, "output_tokens": res.token_out,
             "total_tokens": res.token_in + res.token_out}
    if res.tool_calls and res.tool_calls[0].protocol == "text":
        valid = [c for c in res.tool_calls if c.invalid is None]
        msg = AIMessage(content=res.text, response_metadata=dict(res.message.response_metadata),
                        tool_calls=[{"name": c.name, "args": c.arguments, "id": c.id, "type": "tool_call"}
                                    for c in valid])
    else:
        msg = res.message.model_copy()  # a cached reply is the cache's object: the app's copy is its own
    msg.usage_metadata = usage  # type: ignore[assignment]
    return msg


def _handler(run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None) -> AppRunHandler:
    handlers = [*(run_manager.handlers if run_manager else []), *(run_manager.inheritable_handlers
                                                                  if run_manager else [])]
    for h in handlers:
        if isinstance(h, AppRunHandler):
            return h
    raise RuntimeError("the route's chat model answers inside a mas-econ run of its application system only (no "
                       "run's handler among the call's callbacks); outside a run, give the factory a chat model "
                       "of your own")


async def route_reply(handler: AppRunHandler, run_id: Any, messages: list[BaseMessage],
                      kwargs: dict[str, Any]) -> AIMessage:
    """One call of the route's model for the app, through the call layer; its result is left with ``handler``."""
    rec = handler.calls.get(run_id)
    agent = rec.agent if rec is not None else "app"
    bound: BoundModel = handler.rt.models.for_role(agent)
    tools = list(kwargs.get("tools") or [])
    sent = list(messages)
    call_tools: list[Any] | None = tools or None
    if not bound.native_tools:
        specs = [tool_spec(t) for t in tools]
        sent = as_text_protocol(sent, specs)
        call_tools = list(specs) or None
    temperature = kwargs.get("temperature")
    max_tokens = kwargs.get("max_tokens")
    res = await call_llm(bound, sent, contract=APP_CONTRACT, actor=agent, step=current_tracer().next_step,
                         tools=call_tools, temperature=temperature if isinstance(temperature, int | float) else None,
                         max_tokens=max_tokens if isinstance(max_tokens, int) else None,
                         metadata={"mas_role": agent})
    handler.results[run_id] = res
    return reply_message(res)


class RouteChatModel(BaseChatModel):
    """The route's chat model for an application's agents (see the module docstring)."""

    metadata: dict[str, Any] | None = Field(default_factory=lambda: {ROUTE_MODEL_KEY: True})
    cache: bool | None = False  # a LangChain cache set globally would answer without the call layer: never

    @property
    def _llm_type(self) -> str:
        return "mas-route"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """The model offering ``tools`` (any LangChain form) on each call; ``tool_choice`` is not sent (the call
        layer binds the tools alone)."""
        return self.bind(tools=list(tools), **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        handler = _handler(run_manager)
        msg = await route_reply(handler, run_manager.run_id if run_manager else None, messages, kwargs)
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        handler = _handler(run_manager)
        msg = handler.wait_for(route_reply(handler, run_manager.run_id if run_manager else None, messages, kwargs))
        return ChatResult(generations=[ChatGeneration(message=msg)])
