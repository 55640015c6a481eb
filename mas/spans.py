"""Where each trace event sits in its run's tree of spans (OpenTelemetry ids, always written to the JSONL).

The tree of a run::

    run (root: invoke_workflow <system>)
    └── graph node / agent turn (invoke_agent <actor>)
        ├── chat <model>          one per model call: the agent output or tool calls it produced
        └── execute_tool <tool>   one per tool execution (its tool_result event)

Ids are LangChain run ids, so the spans line up with what a LangChain
callback handler (LangSmith, Langfuse) sees: the root is the graph run (the
runner passes its id as the graph's ``run_id``; the trace id is that whole
UUID), a node span is the node's run, a ``chat`` span is the chat model's
run; a span id is the random low 64 bits of the UUID (LangChain's run ids
are UUIDv7, whose high bits are a clock). Tool executions are no LangChain
runs and get fresh random ids.

An event's ``span_id`` is the span it is recorded on: a model-backed event
(tokens or a model label: an agent's output, a tool call, a judge-backed
decision or vote) is its call's ``chat`` span, a ``tool_result`` its
``execute_tool`` span; anything else (a lexical decision, a published
answer, an error) is an event of the node it happened in (``span_id`` the
node, ``parent_span_id`` the root), or of the root outside any node.
"""

from __future__ import annotations

import os
from uuid import UUID

from langchain_core.messages import BaseMessage
from langchain_core.runnables.config import var_child_runnable_config

from descriptor.events import InputMessage

INPUT_CHARS = 4000
"""Characters of each input message kept when ``tracing.record_inputs`` is on."""

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}


def span_hex(run_id: UUID) -> str:
    """The span id (16 hex digits) of a LangChain run id: its random low 64 bits."""
    return run_id.hex[16:]


def new_span_id() -> str:
    """A fresh random span id (16 hex digits, never all zeros).

    ``os.urandom``, not :mod:`random`: code that seeds the global generator must not make runs share ids.
    """
    while (b := os.urandom(8)) == bytes(8):
        pass
    return b.hex()


def ambient_node() -> str | None:
    """The span of the LangChain run the caller executes in (a graph node), or None outside any run."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    parent = getattr(config.get("callbacks"), "parent_run_id", None)
    return span_hex(parent) if parent is not None else None


def input_messages(messages: list[BaseMessage]) -> list[InputMessage]:
    """Messages as ``[{role, content}]`` (content cut to :data:`INPUT_CHARS`)."""
    out = []
    for m in messages:
        content = m.content if isinstance(m.content, str) else str(m.content)
        out.append(InputMessage(role=_ROLES.get(m.type, m.type), content=content[:INPUT_CHARS]))
    return out


class ChatSpans:
    """Notes each chat model call of a run: its span id under its node, and its input messages if asked.

    :func:`mas.tracing.call_config` notes every model call of a traced run as it is made (the call's
    LangChain run id is chosen there); the event that records the call's output, emitted right after it in
    the same node, takes the call's span id. Not a callback handler: a handler on every call made LangChain
    run its callback machinery for each (run managers, the handlers' events), ~13 % of a scripted debate
    run's CPU with the usage handler it replaced.
    """

    def __init__(self, *, record_inputs: bool = False) -> None:
        self.record_inputs = record_inputs
        self.last: dict[str | None, tuple[str, list[InputMessage] | None]] = {}
        """Node span (None: no node) -> (span id, input messages not yet recorded) of its latest call."""

    def started(self, node: str | None, run_id: UUID, messages: list[BaseMessage]) -> None:
        """A model call with LangChain run id ``run_id`` starts in ``node`` (:func:`ambient_node`) on ``messages``."""
        self.last[node] = (span_hex(run_id), input_messages(messages) if self.record_inputs else None)

    def claim(self, node: str | None) -> tuple[str | None, list[InputMessage] | None]:
        """The span of the latest call made in ``node`` and its input messages (handed out once)."""
        found = self.last.get(node)
        if found is None:
            return None, None
        span_id, inputs = found
        if inputs is not None:
            self.last[node] = (span_id, None)
        return span_id, inputs
