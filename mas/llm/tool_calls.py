"""The tool calls a reply asks for: native ``tool_calls`` (the valid and the unreadable), or a call written as text."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage

from mas.llm.jsonparse import parse_json_object


@dataclass(kw_only=True, slots=True)
class ToolCallRequest:
    """A tool call the model asked for."""

    name: str
    arguments: dict[str, Any]
    id: str
    protocol: Literal["native", "text"]
    """``native``: the provider's ``tool_calls``; ``text``: a fenced JSON block in the reply."""
    invalid: str | None = None
    """Why the call's arguments could not be read (not JSON, not an object): it is answered with that error and
    never run, as a call to an unknown tool is."""


def text_tool_calls(text: str, tool_names: set[str]) -> list[ToolCallRequest]:
    """Tool calls written as text: a fenced or bare ``{"name": ..., "arguments": {...}}`` object.

    A call naming an unknown tool is returned too when it has the protocol's
    shape (a string ``name`` and an ``arguments`` object): the model meant a
    tool call, so it gets a failed tool result and can try again, instead of
    the JSON becoming its final answer. Other JSON (an answer) is no call.
    """
    obj = parse_json_object(text.replace("<tool_call>", "```json").replace("</tool_call>", "```"))
    if not obj or not isinstance(obj.get("name"), str):
        return []
    has_args = "arguments" in obj or "args" in obj
    if obj["name"] not in tool_names and not has_args:
        return []
    args = obj.get("arguments", obj.get("args", {}))
    if isinstance(args, str):
        args = parse_json_object(args) or {"input": args}
    if not isinstance(args, dict):
        args = {"input": args}
    return [ToolCallRequest(name=obj["name"], arguments=dict(args), id=f"call_{uuid.uuid4().hex[:12]}", protocol="text")]


def reply_parts(msg: AIMessage, tools: list[Any] | None, tool_names: set[str]) -> tuple[str, list[ToolCallRequest]]:
    """A reply's text and the tool calls it asks for (native, else written as text; none without tools)."""
    text = msg.content if isinstance(msg.content, str) else str(msg.content)
    # Unknown names are kept: each native call needs a tool result in the
    # history, and the model learns from the failure which tools exist.
    calls = [
        ToolCallRequest(name=c["name"], arguments=dict(c.get("args") or {}),
                        id=c.get("id") or f"call_{uuid.uuid4().hex[:12]}", protocol="native")
        for c in (msg.tool_calls or []) if c.get("name")
    ] if tools else []
    # Calls whose arguments could not be read are the model's output too: each is answered with why (and goes back
    # in the history with its result, which the endpoint demands of every call it sent), not dropped, which left a
    # reply of nothing but such calls as an empty answer.
    calls += [
        ToolCallRequest(name=c["name"], arguments={}, id=c.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                        protocol="native", invalid=f"the arguments could not be read as a JSON object: "
                                                   f"{str(c.get('args'))[:200]!r}")
        for c in (getattr(msg, "invalid_tool_calls", None) or []) if c.get("name")
    ] if tools else []
    if tools and not calls:
        calls = text_tool_calls(text, tool_names)
    return text, calls
