"""A run's report data, written once when the run ends: ``run_<r>.page.json.gz``.

What the run viewer shows of a trace that does not depend on anything decided later (attribution outputs,
rollbacks): the transcript rows without their marks, and each trajectory step's ``step_index``, actor and
event type (for the marks and the attribution panel). The report reads it instead of parsing and formatting
the trace, but only while the trace's SHA-256 (checked once, by the trace digest of
:mod:`descriptor.trace_digest`) is the one recorded here; a missing, damaged, stale or foreign file means the
trace is parsed as before, under the same damage rule (:mod:`descriptor.run_files`).

Why: parsing a trace and building its rows was ~5 ms of the ~7 ms per run a report took (cProfile, 400
scripted runs), so the report's cost per run followed its traces' length. Gzipped (~1 KB a debate
run) because a sweep writes one per run.

The file holds two lines: a header (format, hash, steps, event count) and the rows' JSON, which the report
embeds in its data file as written (:class:`~descriptor.report.run_data.JsonText`) after checking that it
parses as a list: decoding the rows and encoding them again was ~0.3 ms of the ~1.5 ms a run cost a summary
with its report (400 vs 1,200 scripted runs). The marks are not in the rows: the viewer places them.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from descriptor.events import Event
from descriptor.io import json_bytes, write_bytes_atomic
from descriptor.report.run_data import JsonText
from descriptor.report.run_view import step_positions, transcript

PAGE_FORMAT = 2
"""Bumped when the rows :func:`~descriptor.report.run_view.transcript` makes change shape, or the file's layout:
older files are then ignored (the trace is parsed). 2: header and rows on lines of their own."""


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
    data = page_data(events)
    header = {"format": PAGE_FORMAT, "sha256": sha256, "steps": data["steps"], "n_events": data["n_events"]}
    body = json_bytes(header, indent=None) + json_bytes(data["rows"], indent=None)  # each ends in its newline
    write_bytes_atomic(path, gzip.compress(body, compresslevel=6, mtime=0), durable=False, staged=staged)


def read_page_file(path: Path, sha256: str) -> dict[str, Any] | None:
    """The page data in ``path`` if it was written for the trace of hash ``sha256`` in this format; else None.

    Its ``rows`` are the file's JSON text (:class:`~descriptor.report.run_data.JsonText`), checked to be a list."""
    try:
        head, _, rows = gzip.decompress(path.read_bytes()).partition(b"\n")
        data = json.loads(head)
    except (OSError, EOFError, zlib.error, ValueError):
        return None
    ok = (isinstance(data, dict) and data.get("format") == PAGE_FORMAT and data.get("sha256") == sha256
          and isinstance(data.get("steps"), list) and isinstance(data.get("n_events"), int))
    if not ok:
        return None
    try:
        text = rows.decode("utf-8").rstrip("\n")
        if not isinstance(from_json(text), list):
            return None
    except ValueError:  # not UTF-8, not JSON
        return None
    return {"steps": data["steps"], "n_events": data["n_events"], "rows": JsonText(text)}
