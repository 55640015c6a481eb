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

from typing import TYPE_CHECKING

from mas.otel.endpoint import export_endpoint, traces_url
from mas.sweep.hooks import TRACE_PROCESSORS

if TYPE_CHECKING:
    from descriptor.records import RunMetadata
    from mas.config import ExperimentConfig
    from mas.tracing import TraceProcessor

__all__ = ["export_endpoint", "export_processors", "traces_url"]


def export_processors(cfg: ExperimentConfig, meta: RunMetadata) -> list[TraceProcessor]:
    """The trace processors that export run ``meta``'s spans: none when export is off (nothing imported)."""
    url = export_endpoint(cfg)
    if url is None:
        return []
    from mas.otel.sidecar import OtelRunExporter

    return [OtelRunExporter(url, meta, config=cfg.redacted(), record_inputs=cfg.tracing.record_inputs)]


TRACE_PROCESSORS.register("otel", export_processors)  # every traced sweep run exports through it when export is on
