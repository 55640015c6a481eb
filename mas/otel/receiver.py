"""A minimal OTLP/HTTP trace receiver on 127.0.0.1: decodes export requests and keeps the spans (tests, benchmarks).

    with OtlpReceiver() as rx:            # listens on a free port
        ... export to rx.url ...          # e.g. OTEL_EXPORTER_OTLP_ENDPOINT=rx.base_url
        rx.spans                          # list of ReceivedSpan

It answers ``POST /v1/traces`` with an empty ``ExportTraceServiceResponse``
and keeps every span; anything else gets 404. Not a collector: nothing is
stored on disk and nothing is forwarded.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(v: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


@dataclass(kw_only=True, slots=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    status_code: int = 0
    resource: dict[str, Any] = field(default_factory=dict)


def decode_request(req: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest``."""
    out = []
    for rs in req.resource_spans:
        res = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(ReceivedSpan(
                    trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                    parent_span_id=s.parent_span_id.hex() or None, name=s.name, kind=s.kind,
                    start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                    attributes={kv.key: any_value(kv.value) for kv in s.attributes},
                    events=[(e.name, e.time_unix_nano, {kv.key: any_value(kv.value) for kv in e.attributes})
                            for e in s.events],
                    status_code=s.status.code, resource=res))
    return out


class OtlpReceiver:
    """An OTLP/HTTP receiver in a thread of this process (a context manager; stopped on exit)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._spans: list[ReceivedSpan] = []
        self._undecoded: list[ExportTraceServiceRequest] = []
        self.requests = 0
        self._busy = 0
        """Requests being read and answered."""
        self._lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.rstrip("/") != "/v1/traces":
                    self.send_error(404)
                    return
                with receiver._lock:
                    receiver._busy += 1
                try:
                    self._receive()
                finally:
                    with receiver._lock:
                        receiver._busy -= 1
                        receiver._lock.notify_all()

            def _receive(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                try:
                    if encoding == "gzip":
                        body = gzip.decompress(body)
                    elif encoding == "deflate":
                        body = zlib.decompress(body)
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                except Exception:  # a body that is no export request
                    self.send_error(400)
                    return
                # Answered at once, and the spans turned into Python objects only when asked for: as a collector
                # answers before it processes, and does that in compiled code. The sender's figures are the
                # transport's, not this receiver's bookkeeping (which would take a benchmark's spare core).
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                self.wfile.flush()
                with receiver._lock:
                    receiver._undecoded.append(request)
                    receiver.requests += 1

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, once the requests in flight are in (waits up to 10 s)."""
        with self._lock:
            self._lock.wait_for(lambda: self._busy == 0, timeout=10)
            for request in self._undecoded:
                self._spans.extend(decode_request(request))
            self._undecoded.clear()
            return list(self._spans)

    @property
    def base_url(self) -> str:
        """The OTLP base URL (``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1/traces"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def main() -> None:
    """``python -m mas.otel.receiver [PORT]``: print the base URL, receive until SIGTERM or Ctrl-C."""
    import signal
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with OtlpReceiver(port=port) as rx:
        print(rx.base_url, flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
        print(f"received {len(rx.spans)} spans in {rx.requests} requests", file=sys.stderr)


if __name__ == "__main__":
    main()
