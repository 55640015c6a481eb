"""OpenTelemetry export of run traces (GenAI semantic conventions, OTLP/HTTP).

Export is on when ``tracing.otlp_endpoint`` is set, or the standard
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
variable is, and off otherwise (also with ``tracing.export = false``,
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``). When it is off
the OpenTelemetry SDK is not even imported. The spans are built from the
run's (redacted) trace events by :mod:`mas.otel.mapping`, the same way a
finished run is replayed by ``main.py export-otel``
(:mod:`mas.otel.replay`); :mod:`mas.otel.export` sends them, during a sweep
from an exporter process beside it (:mod:`mas.otel.sidecar`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mas.sweep.hooks import TRACE_PROCESSORS

if TYPE_CHECKING:
    from descriptor.records import RunMetadata
    from mas.config import ExperimentConfig
    from mas.tracing import TraceProcessor

__all__ = ["export_endpoint", "export_processors", "traces_url"]


def traces_url(base: str) -> str:
    """The traces URL of an OTLP/HTTP base URL (``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics).

    >>> traces_url("http://127.0.0.1:4318/")
    'http://127.0.0.1:4318/v1/traces'
    """
    return base.rstrip("/") + "/v1/traces"


def export_endpoint(cfg: ExperimentConfig | None = None) -> str | None:
    """Where this process exports spans (the full traces URL), or None when export is off."""
    if cfg is not None and not cfg.tracing.export:
        return None
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if cfg is not None and cfg.tracing.otlp_endpoint:
        return traces_url(cfg.tracing.otlp_endpoint)
    if url := os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return url  # the signal-specific variable is the full URL, used as is
    if url := os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return traces_url(url)
    return None


def export_processors(cfg: ExperimentConfig, meta: RunMetadata) -> list[TraceProcessor]:
    """The trace processors that export run ``meta``'s spans: none when export is off (nothing imported)."""
    url = export_endpoint(cfg)
    if url is None:
        return []
    from mas.otel.sidecar import OtelRunExporter

    return [OtelRunExporter(url, meta, config=cfg.redacted(), record_inputs=cfg.tracing.record_inputs)]


TRACE_PROCESSORS.register("otel", export_processors)  # every traced sweep run exports through it when export is on
