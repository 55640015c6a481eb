"""What the summaries and the report need of a trace beyond its metrics, computed once when the run ends.

``run_<r>.trace_metrics.json`` carries it under ``digest``, with the SHA-256 of the trace file it was computed
from. Readers that need no events (``summarize-experiment``'s task files, the report's run rows) take it instead
of parsing the trace, but only while the trace's bytes still have that hash: an edited, damaged or rewritten
trace is read under the one damage rule as before (:mod:`descriptor.run_files`). Every number here is a plain
function of the trace's events (:func:`trace_digest`, which both paths call), so it stays recomputable.

Why: parsing and validating a trace was ~1.3 ms of the ~2.6 ms it took to read a run, and a cold summary read
every run twice (summaries, then the report); hashing the file takes ~0.05 ms.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from descriptor.events import Decision, Event, is_system_actor
from descriptor.judge_audit import ConsensusDigest, VoteDigest, consensus_digest, election_digests, vote_digest

CONTROLLER = "system:controller"


def trace_sha256(data: bytes) -> str:
    """The hex SHA-256 of a trace file's bytes: what ties a digest to the trace it describes."""
    return hashlib.sha256(data).hexdigest()


SPEND_FIELDS = ("tokens", "latency_ms", "cost_usd", "events")
"""A spend row's fields: tokens, latency (ms), cost (USD), event count (a digest stores them as a list)."""


def spend(events: Sequence[Event], key: str) -> dict[str, list[int | float]]:
    """[tokens, latency (ms), cost (USD), events] (:data:`SPEND_FIELDS`) grouped by ``actor`` or ``event_type``,
    names sorted."""
    out: dict[str, list[int | float]] = {}
    for ev in events:
        row = out.setdefault(getattr(ev, key), [0, 0.0, 0.0, 0])
        row[0] += ev.token_in + ev.token_out
        row[1] += ev.latency_ms
        row[2] += ev.cost_usd
        row[3] += 1
    return dict(sorted(out.items()))


def stalls(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Controller verify events with a reason: the agent that acted just before, and the event's
    ``stage``/``round``/``stop`` payload keys when the system records them."""
    out = []
    last_agent: str | None = None
    for ev in events:
        p = ev.payload
        if ev.actor == CONTROLLER and isinstance(p, Decision) and p.reason:
            out.append({"seq": ev.seq, "reason": p.reason, "after_actor": last_agent,
                        "stage": p.stage, "round": p.round, "stop": p.stop})
        elif not is_system_actor(ev.actor):
            last_agent = ev.actor
    return out


class TraceDigest(BaseModel):
    """``trace_metrics.json``'s ``digest``: per-run inputs of ``analysis.json`` and of the report's run rows."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sha256: str = ""
    """SHA-256 of the trace file it was computed from (blank when computed from parsed events)."""
    error_events: int
    """Events of type ``error``."""
    by_stage: dict[str, list[int | float]]
    """:func:`spend` by event type."""
    by_actor: dict[str, list[int | float]]
    """:func:`spend` by actor."""
    stalls: list[dict[str, Any]]
    """:func:`stalls` (each without its run index)."""
    # Required, though often None: a digest written before a field existed fails to validate, and its run is read
    # from the trace, so a new figure is never silently missing from older runs.
    vote: VoteDigest | None
    """The run's last final vote (:func:`descriptor.judge_audit.vote_digest`); None: none."""
    elections: list[VoteDigest]
    """Its elections (:func:`descriptor.judge_audit.election_digests`)."""
    consensus: ConsensusDigest | None
    """The consensus decisions a judge model decided (:func:`descriptor.judge_audit.consensus_digest`)."""


def trace_digest(events: Sequence[Event], trace_bytes: bytes | None = None) -> TraceDigest:
    """The digest of ``events``; with ``trace_bytes`` (the file they were written to) it carries their hash."""
    return TraceDigest(sha256=trace_sha256(trace_bytes) if trace_bytes is not None else "",
                       error_events=sum(1 for e in events if e.event_type == "error"),
                       by_stage=spend(events, "event_type"), by_actor=spend(events, "actor"), stalls=stalls(events),
                       vote=vote_digest(events), elections=election_digests(events),
                       consensus=consensus_digest(events))


def merge_spend(tables: Sequence[dict[str, list[int | float]]]) -> dict[str, dict[str, int | float]]:
    """Per-run :func:`spend` tables added up (a task's), as ``{name: {field: value}}`` with names sorted."""
    out: dict[str, list[int | float]] = {}
    for table in tables:
        for name, row in table.items():
            acc = out.setdefault(name, [0, 0.0, 0.0, 0])
            for i, v in enumerate(row):
                acc[i] += v
    return {name: dict(zip(SPEND_FIELDS, out[name], strict=True)) for name in sorted(out)}
