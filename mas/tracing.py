"""Writing traces: a :class:`Tracer` per run fans events out to processors.

The current tracer lives in a ``ContextVar`` so graph nodes and the LLM layer
pick it up without passing it around. A failing processor is logged and
skipped; it never breaks a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from langchain_core.runnables.config import var_child_runnable_config

from descriptor.events import (
    ActEvent,
    ErrorEvent,
    Event,
    EventType,
    FinalizeEvent,
    Payload,
    PlanEvent,
    ReviseEvent,
    ToolCallEvent,
    ToolResultEvent,
    VerifyEvent,
    event_line,
)
from descriptor.redact import may_hold_secret, redact
from mas.logging import get_logger
from mas.spans import ChatSpans, ambient_node, new_span_id

log = get_logger(__name__)


def utc_now_iso() -> str:
    """Current time as ISO-8601 UTC with microseconds."""
    return datetime.now(UTC).isoformat()


EVENT_CLASSES: dict[str, type[Event]] = {
    "plan": PlanEvent, "act": ActEvent, "revise": ReviseEvent, "tool_call": ToolCallEvent,
    "tool_result": ToolResultEvent, "verify": VerifyEvent, "finalize": FinalizeEvent, "error": ErrorEvent,
}


class TraceProcessor(Protocol):
    """Receives every event of a run (write a file, print progress, export)."""

    def on_event(self, event: Event, line: str) -> None:
        """``event`` (already redacted) and its trace line: the event as JSON, without ``None`` fields."""
        ...

    def close(self) -> None: ...


class JsonlWriter:
    """Appends one JSON line per event, so a crash leaves a readable prefix of the trace.

    On an event loop, the lines of one loop step (a node's events, emitted
    between two awaits) go out in one write at the end of that step, before
    the run can wait on anything: a write per event cost more than building
    the event. Without a running loop each line is written at once.

    A write that fails (a full disk) is kept in :attr:`error` and ends the
    writing: the run's code raises it (:meth:`raise_failure`), so a trace
    missing lines never becomes a finished run's record.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._pending: list[bytes] = []
        self.error: OSError | None = None

    def on_event(self, event: Event, line: str) -> None:
        self._pending.append(line.encode() + b"\n")
        if len(self._pending) > 1:
            return  # a write is already scheduled for this loop step
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:  # no event loop in this thread
            self.flush()

    def flush(self) -> None:
        """Write the pending lines now."""
        if self._pending and not self._fh.closed and self.error is None:
            try:
                self._fh.write(b"".join(self._pending))
            except OSError as err:  # in a loop callback, where raising would only print a traceback
                err.filename = err.filename or str(self.path)
                self.error = err
        self._pending.clear()

    def raise_failure(self) -> None:
        """Raise the error a write met, if any."""
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.flush()
        self._fh.close()


class ListCollector:
    """Keeps events in memory (tests, progress accounting)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event, line: str) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


LATENCY_DECIMALS = 3
"""Decimals of ``latency_ms`` in a trace (1 µs): perf_counter's other digits are noise, and they were a fifth
of a trace's bytes."""


class Tracer:
    """Numbers and emits the events of one run.

    ``step_index`` counts trajectory steps (agent outputs) across the run; a
    resumed run starts it at the checkpoint's ``steps_done`` so indices stay
    comparable with the original trace. Every event gets its ``span_id`` and
    ``parent_span_id`` (see :mod:`mas.spans`); ``root`` is the run's root
    span as a UUID: the OpenTelemetry trace id is its 32 hex digits, the
    root span id its low 16, and the runner runs the graph with it as
    LangChain ``run_id``.
    """

    def __init__(self, run_id: str, processors: list[TraceProcessor], *, enabled: bool = True,
                 first_step: int = 0, redo: bool = False, root: uuid.UUID | None = None,
                 record_inputs: bool = False) -> None:
        self.run_id = run_id
        self.root = root or uuid.uuid4()
        self.trace_id = self.root.hex
        """OpenTelemetry trace id of the run (32 hex digits)."""
        self.root_span_id = self.root.hex[16:]
        self.chat_spans = ChatSpans(record_inputs=record_inputs)
        self.processors = processors
        self.enabled = enabled
        self.seq = 0
        self.next_step = first_step
        self.redo = redo
        """Mark every trajectory step ``payload.redo`` (a resumed run redoes the steps it emits)."""
        self.totals = {"token_in": 0, "token_out": 0, "cost_usd": 0.0, "llm_calls": 0}

    def emit(
        self,
        actor: str,
        event_type: EventType,
        payload: Payload,
        *,
        start: str | None = None,
        end: str | None = None,
        token_in: int = 0,
        token_out: int = 0,
        latency_ms: float = 0.0,
        cost_usd: float = 0.0,
        state_id: str | None = None,
        model: str | None = None,
        route: str | None = None,
        usage_source: str | None = None,
        cache_hit: bool | None = None,
        cost_usd_saved: float | None = None,
        step: bool = False,
    ) -> Event | None:
        """Record one event; ``step=True`` makes it a trajectory step with the next ``step_index``.

        ``payload`` is the typed payload of ``event_type`` (see :mod:`descriptor.events`); the event is
        validated as its class, so a payload of the wrong type fails here, in the code that wrote it.
        """
        self.totals["token_in"] += token_in
        self.totals["token_out"] += token_out
        self.totals["cost_usd"] += cost_usd
        if not self.enabled:
            if step:
                self.next_step += 1
            return None
        if step:
            payload.step_index = self.next_step
            self.next_step += 1
            if self.redo:
                payload.redo = True
        span_id, parent_span_id = self._place(
            event_type, payload, bool(token_in or token_out or model is not None or usage_source is not None))
        now = utc_now_iso()
        fields = {"run_id": self.run_id, "seq": self.seq, "timestamp_start": start or now,
                  "timestamp_end": end or now, "actor": actor, "token_in": token_in, "token_out": token_out,
                  "latency_ms": round(latency_ms, LATENCY_DECIMALS), "cost_usd": cost_usd, "state_id": state_id, "model": model,
                  "route": route, "usage_source": usage_source, "cache_hit": cache_hit, "cost_usd_saved": cost_usd_saved,
                  "span_id": span_id, "parent_span_id": parent_span_id}
        cls = EVENT_CLASSES[event_type]
        event = cls(**fields, payload=payload)
        line = event_line(event)
        # Walking every string of every event for secrets cost a third of tracing; one search of the
        # trace line finds whether there is anything to redact.
        if may_hold_secret(line):
            event = cls.model_validate(redact(event.model_dump(mode="json", by_alias=True)))
            line = event_line(event)
        self.seq += 1
        for proc in self.processors:
            try:
                proc.on_event(event, line)
            except Exception as err:  # a broken processor must not break the run
                log.warning("trace processor failed", processor=type(proc).__name__, error=str(err))
        return event

    def _place(self, event_type: EventType, payload: Payload, model_backed: bool) -> tuple[str, str | None]:
        """``(span_id, parent_span_id)`` of an event emitted now (the rules are in :mod:`mas.spans`)."""
        node = ambient_node()
        if node is None or node == self.root_span_id:
            node, above = self.root_span_id, None
        else:
            above = self.root_span_id
        if model_backed or event_type == "tool_call":
            span_id, inputs = self.chat_spans.claim(None if node == self.root_span_id else node)
            if inputs is not None and model_backed:
                payload.input_messages = inputs
            return span_id or new_span_id(), node
        if event_type == "tool_result":
            return new_span_id(), node
        return node, above

    def close(self) -> None:
        for proc in self.processors:
            with contextlib.suppress(Exception):
                proc.close()


_current: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("mas_tracer", default=None)


def call_config(metadata: dict[str, Any], messages: list[Any]) -> dict[str, Any]:
    """The LangChain config of one model call on ``messages``: the config it inherits from its graph node, plus
    ``metadata`` and a run id of its own, which a traced run notes as the call's ``chat`` span (:mod:`mas.spans`).

    The inherited config is extended, not replaced, so handlers attached to the graph (Langfuse) and global
    ones (LangSmith) see the call under its node, and ``metadata`` is merged into the node's
    (``langgraph_node``, thread id, ...). No handler of the project's own is added: tokens and latency come
    from the reply and a clock around the call (:func:`mas.llm.call.call_llm`).
    """
    run_id = uuid.uuid4()
    tracer = _current.get()
    if tracer is not None and tracer.enabled:
        tracer.chat_spans.started(ambient_node(), run_id, messages)
    inherited = var_child_runnable_config.get()
    if not inherited:
        return {"metadata": metadata, "run_id": run_id}
    # What merge_configs(inherited, own) gives for these two keys, without its copy of every key and of the
    # node's callback manager (the model's own ensure_config copies what it keeps): 0.1 ms a call.
    return {**inherited, "metadata": {**(inherited.get("metadata") or {}), **metadata}, "run_id": run_id}


def current_tracer() -> Tracer:
    """The tracer of the run in progress (a disabled one outside any run)."""
    tracer = _current.get()
    return tracer if tracer is not None else Tracer("untraced", [], enabled=False)


@contextlib.contextmanager
def use_tracer(tracer: Tracer) -> Iterator[Tracer]:
    """Make ``tracer`` current for the enclosed code (and tasks it starts)."""
    token = _current.set(tracer)
    try:
        yield tracer
    finally:
        _current.reset(token)


class Stopwatch:
    """Start/end timestamps and elapsed ms of a block."""

    def __enter__(self) -> Stopwatch:
        self.start = utc_now_iso()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.end = utc_now_iso()
        self.ms = (time.perf_counter() - self._t0) * 1000
