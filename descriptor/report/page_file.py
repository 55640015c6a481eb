"""A run's report data, written once when the run ends: ``run_<r>.page.json.gz``.

What the run viewer shows of a trace that does not depend on anything decided later (attribution outputs,
rollbacks): the transcript rows without their marks, and each trajectory step's ``step_index``, actor and
event type (for the marks and the attribution panel). The report reads it instead of parsing and formatting
the trace, but only while the trace's SHA-256 (checked once, by the trace digest of
:mod:`descriptor.trace_digest`) is the one recorded here; a missing, damaged, stale or foreign file means the
trace is parsed as before, under the same damage rule (:mod:`descriptor.run_files`).

Why: parsing a trace and building its rows was ~5 ms of the ~7 ms per run a report took (cProfile, 400
scripted runs), so the report's cost per run followed its traces' length (issue 33). Gzipped (~1 KB a debate
run) because a sweep writes one per run.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from descriptor.events import Event
from descriptor.io import json_bytes, write_bytes_atomic
from descriptor.report.run_view import step_positions, transcript

PAGE_FORMAT = 1
"""Bumped when the rows :func:`~descriptor.report.run_view.transcript` makes change shape: older files are then
ignored (the trace is parsed)."""


def page_data(events: Sequence[Event]) -> dict[str, Any]:
    """``{"rows", "steps", "n_events"}`` of ``events``: transcript rows without marks, and per step position
    ``[step_index, actor, event_type]``."""
    positions = step_positions(events)
    steps = [[ev.step_index, ev.actor, ev.event_type] for ev in events if ev.seq in positions]
    return {"rows": transcript(events, {}, positions), "steps": steps, "n_events": len(events)}


def write_page_file(path: Path, events: Sequence[Event], sha256: str, *, staged: bool = False) -> None:
    """Write ``events``' :func:`page_data` for the trace whose hash is ``sha256`` (secrets redacted as in every
    JSON artifact; gzip without a timestamp, so equal data gives equal bytes; not fsynced: see
    :func:`mas.sweep.runner.finish_run`; ``staged``: see :func:`descriptor.io.write_bytes_atomic`)."""
    data = {"format": PAGE_FORMAT, "sha256": sha256, **page_data(events)}
    write_bytes_atomic(path, gzip.compress(json_bytes(data, indent=None), compresslevel=6, mtime=0), durable=False,
                       staged=staged)


def read_page_file(path: Path, sha256: str) -> dict[str, Any] | None:
    """The page data in ``path`` if it was written for the trace of hash ``sha256`` in this format; else None."""
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, zlib.error, ValueError):
        return None
    ok = (isinstance(data, dict) and data.get("format") == PAGE_FORMAT and data.get("sha256") == sha256
          and isinstance(data.get("rows"), list) and isinstance(data.get("steps"), list)
          and isinstance(data.get("n_events"), int))
    return data if ok else None
