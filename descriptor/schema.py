"""The trace schema: one :class:`TraceEvent` per JSONL line.

The trace is the source of truth; metrics, summaries and attribution read it
and never in-memory state. Conventions the metrics rely on are documented in
``descriptor/README.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

TRACE_VERSION = 1

EventType = Literal["plan", "act", "tool_call", "tool_result", "verify", "revise", "finalize", "error"]
EVENT_TYPES: tuple[str, ...] = ("plan", "act", "tool_call", "tool_result", "verify", "revise", "finalize", "error")


def is_system_actor(actor: str) -> bool:
    """System actors (controller, judge, mediator, runtime) are ``system`` or ``system:*``."""
    return actor == "system" or actor.startswith("system:")


class Send(BaseModel):
    """One directed message edge, recorded in the sender's event."""

    # Only the JSON key "from" (not the Python name "from_"): the metrics read ``sends[i]["from"]``.
    model_config = ConfigDict(extra="allow", populate_by_name=False)
    from_: str = Field(alias="from")
    """The sender (a system actor makes the edge system-mediated)."""
    to: str
    """The recipient actor."""


class TraceEvent(BaseModel):
    """One step of a run: who did what, with its tokens, latency and cost."""

    # Numbers are strict (no "5", 5.0 or true for an int, no "2.5" for a float): a trace is data other tools
    # recompute from, and scripts/verify_descriptor.py reads exactly these types; int is accepted as a float.
    model_config = ConfigDict(extra="allow")
    version: int = Field(default=TRACE_VERSION, strict=True)
    """Schema version of this line."""
    run_id: str = ""
    """The run this event belongs to."""
    seq: int = Field(default=0, ge=0, strict=True)
    """0-based position of the event in its trace file."""
    timestamp_start: str
    """ISO-8601 UTC time the step started."""
    timestamp_end: str
    """ISO-8601 UTC time the step ended."""
    actor: str
    """Agent, tool or system actor that produced the event."""
    event_type: EventType
    """What kind of step this was."""
    payload: dict[str, Any] = Field(default_factory=dict)
    """Event-specific content; see descriptor/README.md for the keys metrics read."""
    token_in: int = Field(default=0, ge=0, strict=True)
    """Prompt tokens of the LLM call behind this event (tokens)."""
    token_out: int = Field(default=0, ge=0, strict=True)
    """Completion tokens of the LLM call behind this event (tokens)."""
    latency_ms: float = Field(default=0.0, ge=0, strict=True)
    """Wall time of the step (ms)."""
    cost_usd: float = Field(default=0.0, ge=0, strict=True)
    """Price of the LLM call behind this event (USD)."""
    state_id: str | None = None
    """Top-level graph checkpoint this step ran from (resumable point)."""

    @field_validator("timestamp_start", "timestamp_end")
    @classmethod
    def _iso(cls, v: str) -> str:
        from datetime import datetime, timedelta

        if datetime.fromisoformat(v).utcoffset() != timedelta(0):
            raise ValueError(f"expected an ISO-8601 UTC timestamp (offset +00:00 or Z), got {v!r}")
        return v

    @field_validator("payload")
    @classmethod
    def _payload_conventions(cls, p: dict[str, Any]) -> dict[str, Any]:
        sends = p.get("sends")
        if sends is not None:
            if not isinstance(sends, list):
                raise ValueError("payload.sends must be a list of {from, to} objects")
            for s in sends:
                Send.model_validate(s)
        if "ok" in p and not isinstance(p["ok"], bool):
            raise ValueError("payload.ok must be a boolean")
        if "redo" in p and not isinstance(p["redo"], bool):
            raise ValueError("payload.redo must be a boolean")
        return p


class TraceReadError(ValueError):
    """A trace line that is not valid JSON or not a valid event."""


def read_trace(path: str | Path, *, strict: bool = True) -> list[TraceEvent]:
    """Read and validate a JSONL trace.

    With ``strict=False`` a damaged *last* line (a run that crashed mid-write)
    is dropped; damage anywhere else always raises :class:`TraceReadError`
    naming the file and line.
    """
    events, damaged = [], None
    for lineno, ev, err in iter_trace_lines(path):
        if err is not None:
            if damaged is not None:
                raise TraceReadError(damaged)
            damaged = f"{path}:{lineno}: {err}"
            continue
        if damaged is not None:
            raise TraceReadError(damaged)
        events.append(ev)
    if damaged is not None and strict:
        raise TraceReadError(damaged)
    return events


def iter_trace_lines(path: str | Path) -> Iterator[tuple[int, TraceEvent | None, str | None]]:
    """Yield ``(line number, event or None, error or None)`` for every non-blank line."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, TraceEvent.model_validate(json.loads(line)), None
            except (json.JSONDecodeError, ValidationError) as err:
                yield lineno, None, f"invalid trace line: {str(err).splitlines()[0]}"


class RunResult(BaseModel):
    """``run_<r>.result.json``: written last, atomically; its presence marks a finished run."""

    model_config = ConfigDict(extra="allow")
    version: int = TRACE_VERSION
    run_id: str
    benchmark: str
    system: str
    task_id: str
    run_index: int
    seed: int
    status: Literal["finished", "error"] = "finished"
    """``finished``: the system ran to its end and its answer was evaluated (right or wrong); ``error``: an
    infrastructure failure (model calls failed after retries, a crash of the runtime) ended it: not a task
    result, retried by the next invocation of the sweep."""
    success: bool
    """Benchmark correctness of the final answer."""
    completion: bool
    """A final answer was produced without an explicit runtime failure."""
    score: float
    """Benchmark-native score in [0, 1]."""
    answer: str
    tokens_total: int
    latency_total_ms: float
    cost_total_usd: float
    wall_time_s: float
    error: str | None = None
