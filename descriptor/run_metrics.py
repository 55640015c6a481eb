"""Run-level metrics: one :class:`RunMetrics` per ``run_<r>.trace.jsonl``.

Every number here is a plain function of the trace events, so an independent
implementation (``scripts/verify_descriptor.py``) can recompute it exactly.
The definitions are spelled out in ``descriptor/README.md``; keep the two in
step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from descriptor.events import Event, is_system_actor, read_trace

# Event types whose text is an agent decision; a verbatim repeat of one is a loop.
LOOP_EVENT_TYPES: frozenset[str] = frozenset({"plan", "act", "tool_call", "verify", "revise", "finalize"})

_WS = re.compile(r"\s+")


class RunMetrics(BaseModel):
    """Run-level metrics of one trace (the ``run_<r>.trace_metrics.json`` core)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    latency_total: float
    """Sum of ``latency_ms`` over all events (ms)."""
    tokens_total: int
    """Sum of ``token_in + token_out`` over all events (tokens)."""
    cost_total: float
    """Sum of ``cost_usd`` over all events (USD)."""
    tool_calls_total: int
    """Number of ``tool_call`` events."""
    tool_fail_total: int
    """Number of ``tool_result`` events with ``payload.ok == false``."""
    steps_total: int
    """Number of events in the trace (system events included)."""
    backtrack_rate: float
    """(#revise events + #events with ``payload.redo == true``) / steps_total; 0 when no steps."""
    loop_score: float
    """Share of loop candidates whose signature repeats an earlier candidate; 0 when none."""
    verification_density: float
    """#verify events / steps_total; 0 when no steps."""
    communication_count: int
    """Number of directed ``payload.sends`` edges."""
    communication_agent_to_agent_count: int
    """Edges whose sender (``from``) is not a system actor."""
    communication_system_mediated_count: int
    """Edges whose sender (``from``) is a system actor."""
    handoff_count: int
    """Actor switches between consecutive non-system events."""


def _normalise_text(value: Any) -> str:
    """Lower-case, whitespace-collapsed text; non-strings as canonical JSON."""
    if value is None:
        return ""
    if not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return _WS.sub(" ", value).strip().lower()


def loop_signature(event: Event) -> tuple[str, str, str] | None:
    """The (actor, event_type, normalised content) key used by ``loop_score``.

    ``None`` when the event is not a loop candidate: system actors, event
    types outside :data:`LOOP_EVENT_TYPES`, or an empty signature text.
    For ``tool_call`` the text is ``payload.tool`` plus the canonical JSON of
    ``payload.arguments``; for other types it is ``payload.content``.

    >>> from descriptor.events import ActEvent, AgentOutput
    >>> ev = ActEvent(timestamp_start="2026-01-01T00:00:00Z", timestamp_end="2026-01-01T00:00:00Z",
    ...               actor="solver", payload=AgentOutput(role="solver", content="  X =  1 ", answer_artifact="1",
    ...                                                   confidence=1.0))
    >>> loop_signature(ev)
    ('solver', 'act', 'x = 1')
    """
    if is_system_actor(event.actor) or event.event_type not in LOOP_EVENT_TYPES:
        return None
    p = event.payload
    if event.event_type == "tool_call":
        tool = _normalise_text(p.tool)  # type: ignore[union-attr]
        args = p.arguments  # type: ignore[union-attr]
        text = tool + " " + json.dumps(args, sort_keys=True, ensure_ascii=False) if tool else ""
        text = text.strip()
    else:
        text = _normalise_text(getattr(p, "content", None))
    if not text:
        return None
    return (event.actor, event.event_type, text)


def loop_score(events: Sequence[Event]) -> float:
    """Share of loop candidates whose :func:`loop_signature` appeared earlier in the run.

    >>> from descriptor.events import ActEvent, AgentOutput
    >>> mk = lambda c: ActEvent(timestamp_start="2026-01-01T00:00:00Z", timestamp_end="2026-01-01T00:00:00Z",
    ...     actor="a", payload=AgentOutput(role="solver", content=c, answer_artifact="", confidence=0.5))
    >>> loop_score([mk("x"), mk("y"), mk("x"), mk("X ")])
    0.5
    """
    seen: set[tuple[str, str, str]] = set()
    candidates = repeats = 0
    for ev in events:
        sig = loop_signature(ev)
        if sig is None:
            continue
        candidates += 1
        if sig in seen:
            repeats += 1
        else:
            seen.add(sig)
    return repeats / candidates if candidates else 0.0


def _edges(events: Sequence[Event]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for ev in events:
        for s in ev.payload.sends or ():
            out.append((s.from_, s.to))
    return out


def handoff_count(events: Sequence[Event]) -> int:
    """Actor switches across consecutive non-system events (tools count as actors)."""
    actors = [ev.actor for ev in events if not is_system_actor(ev.actor)]
    return sum(1 for a, b in pairwise(actors) if a != b)


def compute_run_metrics(events: Sequence[Event]) -> RunMetrics:
    """Run-level metrics of one run's events, in trace order.

    >>> compute_run_metrics([]).backtrack_rate
    0.0
    """
    steps = len(events)
    revise = sum(1 for ev in events if ev.event_type == "revise")
    redo = sum(1 for ev in events if ev.payload.redo is True)
    verify = sum(1 for ev in events if ev.event_type == "verify")
    edges = _edges(events)
    system_edges = sum(1 for sender, _ in edges if is_system_actor(sender))
    return RunMetrics(
        latency_total=float(sum(ev.latency_ms for ev in events)),
        tokens_total=sum(ev.token_in + ev.token_out for ev in events),
        cost_total=float(sum(ev.cost_usd for ev in events)),
        tool_calls_total=sum(1 for ev in events if ev.event_type == "tool_call"),
        tool_fail_total=sum(1 for ev in events if ev.event_type == "tool_result" and ev.payload.ok is False),
        steps_total=steps,
        backtrack_rate=(revise + redo) / steps if steps else 0.0,
        loop_score=loop_score(events),
        verification_density=verify / steps if steps else 0.0,
        communication_count=len(edges),
        communication_agent_to_agent_count=len(edges) - system_edges,
        communication_system_mediated_count=system_edges,
        handoff_count=handoff_count(events),
    )


def run_metrics_from_file(path: str | Path, *, strict: bool = True) -> RunMetrics:
    """:func:`compute_run_metrics` of a ``run_<r>.trace.jsonl`` file.

    With ``strict=False`` a damaged last line is dropped (see
    :func:`descriptor.events.read_trace`); otherwise it raises.
    """
    return compute_run_metrics(read_trace(path, strict=strict))
