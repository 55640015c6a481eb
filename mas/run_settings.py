"""The settings of what a run keeps and how it runs code and traces: ``[storage]``, ``[sandbox]``, ``[inject]``,
``[tracing]`` (parts of :class:`mas.config.ExperimentConfig`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from mas.study_settings import Strict as _Strict


class StorageSettings(_Strict):
    """What a run keeps on disk."""

    checkpoints: Literal["failed", "all", "none"] = "failed"
    """LangGraph checkpoints exist for rollback: ``failed`` keeps them for runs that did not succeed (the ones a
    rollback can repair), ``all`` for every run, ``none`` never writes them (in-memory checkpoints only)."""


class SandboxSettings(_Strict):
    """Limits and isolation of the Python-execution tool and of code evaluation (see :mod:`benchmark.sandbox`)."""

    timeout_s: float = Field(default=5.0, gt=0)
    """Wall-clock limit of one execution of model-written code (s); the process tree is killed at the limit."""
    memory_mb: int = Field(default=512, ge=32)
    """Address-space limit of that process (MB)."""
    isolation: Literal["namespaces", "unsafe-no-namespaces"] = "namespaces"
    """``namespaces``: model-written code runs in its own user, PID, network and mount namespaces, and a sweep
    refuses to start where they are unavailable. ``unsafe-no-namespaces``: only resource limits and an audit
    hook, which is no security boundary (the code can read your files); also the default of the code
    benchmarks' ``isolation`` option."""


class InjectSettings(_Strict):
    """Scripted-model error injection (ground truth for attribution tests)."""

    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Fraction of runs, chosen with the seed, that get one wrong step."""
    agent: str | None = None
    """Inject at this agent only (exact name); None: any agent."""
    step: int | None = Field(default=None, ge=0)
    """Inject at this trajectory step index; None: a seeded position."""
    position: Literal["left", "mid", "right", "uniform"] | None = None
    """Rollback scenario: place the error in the first (``left``), middle or last part of the run's steps, dense
    there, or ``uniform`` over them (see :mod:`mas.sweep.injection`); None: ``step``, else one of the first four."""

    @model_validator(mode="after")
    def _one_placement(self) -> InjectSettings:
        if self.step is not None and self.position is not None:
            raise ValueError(f"inject.step ({self.step}) and inject.position ({self.position!r}) both place the "
                             "error; set one of them")
        return self


class TracingSettings(_Strict):
    """Where traces go besides the run's JSONL, and what they may hold.

    Span ids are always in the JSONL; spans are exported over OTLP/HTTP
    when ``otlp_endpoint`` is set or the standard variable
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    is (see :mod:`mas.otel`); headers (e.g. a backend's key) come from
    ``OTEL_EXPORTER_OTLP_HEADERS``, never from this file.
    """

    otlp_endpoint: str | None = None
    """OTLP/HTTP base URL (spans go to ``<url>/v1/traces``), e.g. ``http://127.0.0.1:6006``; None: the
    environment decides."""
    export: bool = True
    """False: never export, whatever the environment says."""
    record_inputs: bool = False
    """Record the model's input messages in the trace (``payload.input_messages``) and message contents in
    exported spans (off: spans carry names, timing, tokens and decisions, no text)."""

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, got {v!r}")
        return v
