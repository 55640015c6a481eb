"""Where spans are exported: the OTLP/HTTP traces URL from the config or the standard environment variables."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mas.config import ExperimentConfig


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
