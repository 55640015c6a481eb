"""A run's trace events as OpenTelemetry spans (GenAI semantic conventions), without the SDK.

One trace per run; the spans (see :mod:`mas.spans` for where ids come from):

==========================  ===============================================================
span                        attributes (besides ``mas.*``)
==========================  ===============================================================
``invoke_workflow <sys>``   root: ``gen_ai.operation.name=invoke_workflow``,
                            ``gen_ai.workflow.name``, ``gen_ai.conversation.id`` (thread);
                            ``mas.experiment_id``, ``mas.benchmark``, ``mas.system``,
                            ``mas.task_id``, ``mas.run_index``, ``mas.seed``
``invoke_agent <actor>``    a graph node / agent turn: ``gen_ai.agent.name``,
                            ``gen_ai.provider.name``; spans its events (first start to last end)
``chat <model>``            a model call (kind CLIENT): ``gen_ai.provider.name``,
                            ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``,
                            ``gen_ai.usage.output_tokens``, ``gen_ai.agent.name``; with
                            ``record_inputs`` ``gen_ai.input.messages`` / ``gen_ai.output.messages``
``execute_tool <tool>``     a tool execution: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
                            ``error.type`` when it failed; with ``record_inputs`` its arguments
                            and result
==========================  ===============================================================

Controller decisions, final votes, published answers and further tool
calls of a reply are span events (``mas.termination_decision``,
``mas.final_vote``, ``mas.final_answer``, ``mas.tool_call``); errors are
``exception`` events, and one that ended a call or the run sets its span's
status to error. Message contents (answers, reasoning, tool arguments and
outputs, explanations) leave only with ``record_inputs``; the events are
the trace's, already redacted. A trace without span ids (version 1, or
written before span ids existed) gets ids derived from the run's trace id:
a node per (checkpoint, actor), a ``chat`` span per model-backed event.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from descriptor.events import Decision, ErrorInfo, Event, FinalAnswer, FinalVote, ToolCall, ToolResult, is_system_actor
from descriptor.records import RunIdentity, RunMetadata

_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PROVIDER_NAMES = {"openai": "openai", "embedded": "llama.cpp", "scripted": "mas.scripted"}
"""Route provider -> ``gen_ai.provider.name`` (``openai`` covers every OpenAI-compatible endpoint)."""
TEXT_FIELDS = frozenset({"content", "answer_artifact", "reasoning", "consensus_answer", "consensus_explanation",
                         "progress_explanation", "explanation", "reason_detail", "output", "arguments",
                         "input_messages", "subtask"})
"""Payload fields holding message contents: exported only with ``record_inputs``."""
_EVENT_NAMES = {Decision: "mas.termination_decision", FinalVote: "mas.final_vote", FinalAnswer: "mas.final_answer",
                ToolCall: "mas.tool_call"}


def to_ns(ts: str) -> int:
    """An ISO-8601 UTC timestamp in ns since the epoch (exact to the microsecond)."""
    return (datetime.fromisoformat(ts) - _EPOCH) // timedelta(microseconds=1) * 1000


def is_model_event(ev: Event) -> bool:
    """True when a model call is behind the event (it carries tokens or a model label)."""
    return bool(ev.token_in or ev.token_out or ev.model is not None or ev.usage_source is not None)


@dataclass(kw_only=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(kw_only=True, slots=True)
class SpanData:
    """One span, ready for any exporter."""

    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    client: bool = False
    """Span kind CLIENT (a model call); INTERNAL otherwise."""
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    """Status ERROR with this description; None: status unset."""

    def cover(self, start_ns: int, end_ns: int) -> None:
        self.start_ns, self.end_ns = min(self.start_ns, start_ns), max(self.end_ns, end_ns)


@dataclass(kw_only=True, frozen=True, slots=True)
class RunInfo:
    """What the root span says about the run."""

    trace_id: str
    identity: RunIdentity
    """The run's name (the metadata or result record it came from)."""
    experiment_id: str
    thread_id: str
    start: str | None = None
    end: str | None = None
    error: str | None = None
    providers: dict[str, str] = field(default_factory=dict)
    """Model label -> ``gen_ai.provider.name``."""
    default_provider: str | None = None
    judge_model: str | None = None
    """Label of the judge's model: decisions and votes carry the judge call's usage but no label."""

    @property
    def root_span_id(self) -> str:
        return self.trace_id[16:]

    @classmethod
    def from_metadata(cls, meta: RunMetadata, *, end: str | None = None) -> RunInfo:
        """The run of ``meta``; its trace id is ``otel_trace_id``, else derived from the run id."""
        trace_id = meta.otel_trace_id or hashlib.sha256(meta.run_id.encode()).hexdigest()[:32]
        if end is None and meta.wall_time_s is not None:
            end = (datetime.fromisoformat(meta.started_at) + timedelta(seconds=meta.wall_time_s)).isoformat()
        providers, default = _providers(meta)
        return cls(judge_model=_judge_model(meta), trace_id=trace_id, identity=meta, experiment_id=meta.experiment_id,
                   thread_id=meta.thread_id, start=meta.started_at, end=end, error=meta.error, providers=providers,
                   default_provider=default)


def _providers(meta: RunMetadata) -> tuple[dict[str, str], str | None]:
    routes = meta.config.get("models") if isinstance(meta.config, dict) else None
    out: dict[str, str] = {}
    default = None
    for name, route in (routes or {}).items():
        if not isinstance(route, dict):
            continue
        provider = PROVIDER_NAMES.get(str(route.get("provider", "openai")), str(route.get("provider")))
        label = str(route.get("model") or "")
        if route.get("provider") == "scripted" and not label.startswith("scripted"):
            label = "scripted"
        out[label] = provider
        recorded = meta.models.get(name, "")
        out[recorded.split(":", 1)[1] if recorded.startswith(f"{route.get('provider')}:") else recorded] = provider
        if name == "default":
            default = provider
    return out, default


def _judge_model(meta: RunMetadata) -> str | None:
    cfg = meta.config if isinstance(meta.config, dict) else {}
    routes = cfg.get("models") or {}
    name = (cfg.get("roles") or {}).get("judge") or ("judge" if "judge" in routes else "default")
    recorded = meta.models.get(name)
    if recorded and ":" not in recorded:  # the label of the model actually called (written at the run's end)
        return recorded
    route = routes.get(name) if isinstance(routes.get(name), dict) else {"provider": name, "model": name}
    label = str(route.get("model") or "")
    return ("scripted" if not label.startswith("scripted") else label) if route.get("provider") == "scripted" else label or None


def _derive(trace_id: str, kind: str, key: object) -> str:
    return hashlib.sha256(f"{trace_id}|{kind}|{key}".encode()).hexdigest()[:16]


def derived_ids(events: list[Event], trace_id: str) -> list[tuple[str, str | None]]:
    """``(span_id, parent_span_id)`` per event for a trace written without them (rules of :mod:`mas.spans`).

    A node is an actor's events run from one checkpoint (``state_id``), or a
    run of consecutive events by one actor where no checkpoint is recorded.
    """
    root = trace_id[16:]
    out: list[tuple[str, str | None]] = []
    last_chat: dict[str, str] = {}
    group, previous = 0, None
    for ev in events:
        if ev.state_id is None and ev.actor != previous:
            group += 1
        previous = ev.actor
        if ev.actor == "system:runtime":
            out.append((root, None))
            continue
        node = _derive(trace_id, "node", f"{ev.state_id}|{ev.actor}" if ev.state_id else f"{group}|{ev.actor}")
        if is_model_event(ev):
            last_chat[node] = _derive(trace_id, "chat", ev.seq)
            out.append((last_chat[node], node))
        elif ev.event_type == "tool_call":
            out.append((last_chat.setdefault(node, _derive(trace_id, "chat", ev.seq)), node))
        elif ev.event_type == "tool_result":
            out.append((_derive(trace_id, "tool", ev.seq), node))
        else:
            out.append((node, root))
    return out


def _attr(value: Any) -> Any:
    """An attribute value OpenTelemetry accepts: scalars as they are, anything else as JSON."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


_SKIP = frozenset({"input_messages", "kind", "sends"})
"""Payload fields not exported: the messages go as ``gen_ai.input.messages``, ``kind`` is implied by the span
or event name, and ``sends`` (message edges) stay in the trace."""


def payload_attributes(ev: Event, *, record_inputs: bool) -> dict[str, Any]:
    """The event's payload as ``mas.*`` attributes (message contents only with ``record_inputs``)."""
    data = ev.payload.model_dump(mode="json", by_alias=True, exclude_none=True)
    attrs: dict[str, Any] = {"mas.event_type": ev.event_type, "mas.seq": ev.seq}
    for key, value in data.items():
        if (key in TEXT_FIELDS and not record_inputs) or key in _SKIP:
            continue
        if value == [] or value == {}:
            continue
        attrs[f"mas.{key}"] = _attr(value)
    return attrs


def _times(ev: Event) -> tuple[int, int]:
    start, end = to_ns(ev.timestamp_start), to_ns(ev.timestamp_end)
    if start == end and ev.latency_ms:
        start = end - int(ev.latency_ms * 1e6)  # recorded at its end with its duration (a judge call)
    return start, end


def _messages_attr(ev: Event) -> dict[str, str]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` of a model-backed event (record_inputs only)."""
    out = {}
    p = ev.payload
    if p.input_messages:
        out["gen_ai.input.messages"] = json.dumps(
            [{"role": m.role, "parts": [{"type": "text", "content": m.content}]} for m in p.input_messages],
            ensure_ascii=False)
    if isinstance(p, ToolCall):
        part: dict[str, Any] = {"type": "tool_call", "id": p.tool_call_id, "name": p.tool, "arguments": p.arguments}
    else:
        text = getattr(p, "content", "") or getattr(p, "answer_artifact", "") or getattr(p, "explanation", "")
        part = {"type": "text", "content": text}
    out["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [part], "finish_reason": "stop"}],
                                               ensure_ascii=False)
    return out


def _span_event(ev: Event, *, record_inputs: bool) -> tuple[SpanEvent, str | None]:
    """The event as a span event, and the error it sets on its span (None: none)."""
    attrs = {"mas.actor": ev.actor, **payload_attributes(ev, record_inputs=record_inputs)}
    p = ev.payload
    time_ns = to_ns(ev.timestamp_end)
    if isinstance(p, ErrorInfo):
        attrs.update({"exception.type": f"mas.{p.kind}", "exception.message": p.error})
        return SpanEvent(name="exception", time_ns=time_ns, attributes=attrs), None if p.will_retry else p.kind
    if isinstance(p, ToolCall):
        attrs.update({"gen_ai.tool.name": p.tool, **({"gen_ai.tool.call.id": p.tool_call_id} if p.tool_call_id else {})})
    name = _EVENT_NAMES.get(type(p), f"mas.{ev.event_type}")
    return SpanEvent(name=name, time_ns=time_ns, attributes=attrs), None


class _Builder:
    def __init__(self, run: RunInfo, record_inputs: bool) -> None:
        self.run, self.record_inputs = run, record_inputs
        self.root = run.root_span_id
        start = to_ns(run.start) if run.start else None
        end = to_ns(run.end) if run.end else start
        self.spans: dict[str, SpanData] = {}
        self.bounds = (start, end)
        self.members: dict[str, list[Event]] = {}
        """Node span -> events in it (its children's and its own)."""
        self.attached: dict[str, list[tuple[SpanEvent, str | None]]] = {}
        self.tool_args: dict[str, Any] = {}

    def provider(self, model: str | None) -> str | None:
        return self.run.providers.get(model or "", self.run.default_provider)

    def chat(self, ev: Event, span_id: str, parent: str) -> None:
        start, end = _times(ev)
        span = self.spans.get(span_id)
        model = ev.model or (self.run.judge_model if is_system_actor(ev.actor) else None)
        if span is None:
            attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.agent.name": ev.actor,
                                     "gen_ai.conversation.id": self.run.thread_id, "gen_ai.usage.input_tokens": 0,
                                     "gen_ai.usage.output_tokens": 0, "mas.cost_usd": 0.0}
            if (provider := self.provider(model)) is not None:
                attrs["gen_ai.provider.name"] = provider
            if model is not None:
                attrs["gen_ai.request.model"] = model
            if ev.usage_source is not None:
                attrs["mas.usage_source"] = ev.usage_source
            attrs.update(payload_attributes(ev, record_inputs=self.record_inputs))
            if self.record_inputs:
                attrs.update(_messages_attr(ev))
            span = SpanData(span_id=span_id, parent_span_id=parent, name=f"chat {model}" if model else "chat",
                            start_ns=start, end_ns=end, attributes=attrs, client=True)
            self.spans[span_id] = span
        else:  # a second event recorded on one call: its usage adds up, the event is kept as a span event
            span.cover(start, end)
            self.attach(span_id, _span_event(ev, record_inputs=self.record_inputs))
        span.attributes["gen_ai.usage.input_tokens"] += ev.token_in
        span.attributes["gen_ai.usage.output_tokens"] += ev.token_out
        span.attributes["mas.cost_usd"] += ev.cost_usd
        if isinstance(ev.payload, Decision | FinalVote):
            self.attach(span_id, _span_event(ev, record_inputs=self.record_inputs))

    def tool(self, ev: Event, span_id: str, parent: str) -> None:
        p = ev.payload
        assert isinstance(p, ToolResult)
        start, end = _times(ev)
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": p.tool,
                                 "gen_ai.tool.type": "function", **payload_attributes(ev, record_inputs=self.record_inputs)}
        if p.tool_call_id:
            attrs["gen_ai.tool.call.id"] = p.tool_call_id
        if self.record_inputs:
            attrs["gen_ai.tool.call.result"] = p.output
            if p.tool_call_id in self.tool_args:
                attrs["gen_ai.tool.call.arguments"] = json.dumps(self.tool_args[p.tool_call_id], ensure_ascii=False)
        error = None if p.ok else "tool_error"
        if error:
            attrs["error.type"] = error
        self.spans[span_id] = SpanData(span_id=span_id, parent_span_id=parent, name=f"execute_tool {p.tool}",
                                       start_ns=start, end_ns=end, attributes=attrs, error=error)

    def attach(self, span_id: str, item: tuple[SpanEvent, str | None]) -> None:
        self.attached.setdefault(span_id, []).append(item)

    def add(self, ev: Event, span_id: str, parent: str | None) -> None:
        if isinstance(ev.payload, ToolCall) and ev.payload.tool_call_id:
            self.tool_args[ev.payload.tool_call_id] = ev.payload.arguments
        if is_model_event(ev):
            self.chat(ev, span_id, parent or self.root)
            node = parent or self.root
        elif isinstance(ev.payload, ToolResult):
            self.tool(ev, span_id, parent or self.root)
            node = parent or self.root
        else:
            self.attach(span_id, _span_event(ev, record_inputs=self.record_inputs))
            node = span_id if span_id not in self.spans else (parent or self.root)
        if node != self.root:
            self.members.setdefault(node, []).append(ev)

    def node_spans(self) -> None:
        for node, evs in self.members.items():
            if node in self.spans:
                continue
            actors = list(dict.fromkeys(e.actor for e in evs))
            actor = next((a for a in actors if not is_system_actor(a)), actors[0])
            times = [_times(e) for e in evs]
            attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": actor,
                                     "gen_ai.conversation.id": self.run.thread_id}
            model = next((e.model for e in evs if e.model), None)
            if (provider := self.provider(model)) is not None:
                attrs["gen_ai.provider.name"] = provider
            if len(actors) > 1:
                attrs["mas.actors"] = actors
            for key in ("round", "cycle"):
                value = next((getattr(e.payload, key, None) for e in evs if getattr(e.payload, key, None) is not None),
                             None)
                if isinstance(value, int):
                    attrs[f"mas.{key}"] = value
            if state := next((e.state_id for e in evs if e.state_id), None):
                attrs["mas.state_id"] = state
            self.spans[node] = SpanData(span_id=node, parent_span_id=self.root, name=f"invoke_agent {actor}",
                                        start_ns=min(t[0] for t in times), end_ns=max(t[1] for t in times),
                                        attributes=attrs)

    def root_span(self, events: list[Event]) -> SpanData:
        run, who = self.run, self.run.identity
        starts = [s.start_ns for s in self.spans.values()] + [to_ns(e.timestamp_start) for e in events]
        ends = [s.end_ns for s in self.spans.values()] + [to_ns(e.timestamp_end) for e in events]
        start = min([t for t in [self.bounds[0], *starts] if t is not None], default=0)
        end = max([t for t in [self.bounds[1], *ends] if t is not None], default=start)
        attrs = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": who.system,
                 "gen_ai.conversation.id": run.thread_id, "openinference.span.kind": "CHAIN",
                 "mas.run_id": who.run_id, "mas.experiment_id": run.experiment_id, "mas.benchmark": who.benchmark,
                 "mas.system": who.system, "mas.task_id": who.task_id, "mas.run_index": who.run_index,
                 "mas.seed": who.seed}
        return SpanData(span_id=self.root, parent_span_id=None, name=f"invoke_workflow {who.system}", start_ns=start,
                        end_ns=end, attributes=attrs, error="run_failed" if run.error else None)


def run_spans(events: list[Event], run: RunInfo, *, record_inputs: bool = False) -> list[SpanData]:
    """The spans of one run's trace: the root first, then nodes, calls and tool executions in trace order."""
    ok = all(e.span_id and _HEX16.match(e.span_id) and (e.parent_span_id is None or _HEX16.match(e.parent_span_id))
             for e in events)
    ids = [(e.span_id, e.parent_span_id) for e in events] if ok else derived_ids(events, run.trace_id)
    b = _Builder(run, record_inputs)
    for ev, (span_id, parent) in zip(events, ids, strict=True):
        b.add(ev, span_id or b.root, parent)  # type: ignore[arg-type]
    b.node_spans()
    root = b.root_span(events)
    b.spans.pop(b.root, None)
    spans = [root, *sorted(b.spans.values(), key=lambda s: (s.start_ns, s.parent_span_id != b.root))]
    by_id = {s.span_id: s for s in spans}
    for span_id, items in b.attached.items():
        target = by_id.get(span_id, root)
        for event, error in items:
            target.events.append(event)
            if error and target.error is None:
                target.error = error
    return spans
