"""Sending spans with the OpenTelemetry SDK and its OTLP/HTTP exporter (imported only where spans are sent).

The spans already exist when they are sent (ids, times and attributes come
from the trace, see :mod:`mas.otel.mapping`), so they are handed to the
exporter as finished ``ReadableSpan`` objects: no tracer provider, no
sampling, no id generator. During a sweep this runs in the exporter process
(:mod:`mas.otel.sidecar`): one ``BatchSpanProcessor`` per endpoint sends a
run's spans from a background thread; ``export-otel`` sends them at once.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Sequence
from importlib import metadata as importlib_metadata

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as OtelEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from descriptor.events import Event
from descriptor.records import RunMetadata
from mas.otel.mapping import RunInfo, SpanData, run_spans

SERVICE_NAME = "mas-econ"


def _version() -> str:
    try:
        return importlib_metadata.version("mas-econ")
    except importlib_metadata.PackageNotFoundError:
        return "0"


_RESOURCE: Resource | None = None
_SCOPE = InstrumentationScope("mas-econ", _version())


def resource() -> Resource:
    """``service.name`` mas-econ unless ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` say otherwise."""
    global _RESOURCE
    if _RESOURCE is None:
        named = "OTEL_SERVICE_NAME" in os.environ or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        _RESOURCE = Resource.create({} if named else {"service.name": SERVICE_NAME})
    return _RESOURCE


def readable(span: SpanData, trace_id: str) -> ReadableSpan:
    """A finished SDK span with ``span``'s ids, times, attributes and events."""
    tid = int(trace_id, 16)
    flags = TraceFlags(TraceFlags.SAMPLED)
    parent = (SpanContext(tid, int(span.parent_span_id, 16), is_remote=False, trace_flags=flags)
              if span.parent_span_id else None)
    status = Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.UNSET)
    return ReadableSpan(
        name=span.name, context=SpanContext(tid, int(span.span_id, 16), is_remote=False, trace_flags=flags),
        parent=parent, resource=resource(), attributes=span.attributes,
        events=[OtelEvent(e.name, e.attributes, e.time_ns) for e in span.events],
        kind=SpanKind.CLIENT if span.client else SpanKind.INTERNAL, status=status, start_time=span.start_ns,
        end_time=span.end_ns, instrumentation_scope=_SCOPE,
    )


def exporter(url: str, *, timeout_s: float | None = None) -> SpanExporter:
    """The OTLP/HTTP (protobuf) exporter for ``url`` (the full traces URL); headers from the environment."""
    return OTLPSpanExporter(endpoint=url, timeout=timeout_s)


_SINKS: dict[str, BatchSpanProcessor] = {}
_LOCK = threading.Lock()


def sink(url: str) -> BatchSpanProcessor:
    """This process's batch processor for ``url`` (made on first use; flushed and shut down at exit)."""
    with _LOCK:
        if url not in _SINKS:
            if not _SINKS:
                atexit.register(shutdown_sinks)
            # A fast sweep queues thousands of spans a second; the SDK's default queue (2048) would drop some
            # whenever the endpoint is slow for a moment. OTEL_BSP_* variables still override.
            queue = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE", "65536"))
            # Send every 100 ms rather than every 5 s: the exporter process has a core to itself, and a sweep's
            # final flush then finds little left to send.
            delay = int(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", "100"))
            _SINKS[url] = BatchSpanProcessor(exporter(url), max_queue_size=queue, schedule_delay_millis=delay)
        return _SINKS[url]


def shutdown_sinks() -> None:
    """Send what the batch processors hold and stop them."""
    with _LOCK:
        sinks = list(_SINKS.values())
        _SINKS.clear()
    for s in sinks:
        s.shutdown()


def flush_sinks(timeout_s: float) -> bool:
    """Send what the batch processors hold, waiting at most ``timeout_s`` seconds in all; True when it was sent.

    On a thread of its own: an endpoint that does not answer holds an export for the exporter's own timeout
    (10 s) and its retries, and the SDK's ``force_flush`` exports in the caller's thread past its own timeout."""
    with _LOCK:
        sinks = list(_SINKS.values())
    done = threading.Event()

    def flush() -> None:
        for s in sinks:
            s.force_flush()
        done.set()

    threading.Thread(target=flush, name="otel-exit-flush", daemon=True).start()
    return done.wait(timeout_s)


def queue_run(url: str, meta: RunMetadata, *, end: str, events: list[Event], record_inputs: bool = False) -> None:
    """Queue the spans of run ``meta`` (its trace ``events``, ended at ``end``) for export to ``url``."""
    run = RunInfo.from_metadata(meta, end=end)
    out = sink(url)
    for span in run_spans(events, run, record_inputs=record_inputs):
        out.on_end(readable(span, run.trace_id))


def export_now(spans: Sequence[ReadableSpan], exp: SpanExporter) -> bool:
    """Export ``spans`` synchronously; True when the endpoint took them."""
    return exp.export(list(spans)) is SpanExportResult.SUCCESS
