"""The experiment's index of finished runs: ``<root>/runs.jsonl``, one result per line, appended as runs finish.

Resume, summaries and reports read this one file instead of every run's
``result.json``. It is a cache of the run files, never their authority: a
run is finished when its ``result.json`` is, a line whose run has no
``result.json`` any more is ignored, a run redone later appends a newer line
(the last one wins), and a finished run missing from the index (a crash
between its ``result.json`` and its line) is found in its directory and
added back by the sweep that finds it.

One writer appends (the sweep's process, under the experiment lock); each
line goes out in one ``O_APPEND`` write, so a crash leaves at most a damaged
last line, which readers skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from descriptor.io import json_bytes
from descriptor.layout import INDEX_NAME
from descriptor.records import RunResult


class IndexEntry(BaseModel):
    """One line of the index: a run's result and the ``result.json`` it was read from (size, mtime)."""

    result: RunResult
    size: int
    """Bytes of ``result.json`` when indexed."""
    mtime_ns: int
    """Its modification time (ns): a rewritten ``result.json`` no longer matches its line."""

    def matches(self, path: Path) -> bool:
        """Whether ``path`` (the run's ``result.json``) is still the file this line indexed."""
        try:
            st = path.stat()
        except OSError:
            return False
        return st.st_size == self.size and st.st_mtime_ns == self.mtime_ns


def entry(result: RunResult, path: Path) -> IndexEntry:
    """The index line of ``result``, read from (or just written to) ``path``."""
    st = path.stat()
    return IndexEntry(result=result, size=st.st_size, mtime_ns=st.st_mtime_ns)


def append_entries(root: Path, entries: Iterable[IndexEntry]) -> None:
    """Append one line per entry to ``root/runs.jsonl`` (secrets redacted, like every artifact)."""
    # json_bytes redacts the data (also secrets that JSON escapes), not the text of one line.
    data = b"".join(json_bytes(e.model_dump(mode="json"), indent=None) for e in entries)
    if not data:
        return
    fd = os.open(root / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_index(root: Path) -> dict[str, IndexEntry]:
    """run_id -> its latest line (damaged lines skipped: the run files are the truth)."""
    out: dict[str, IndexEntry] = {}
    try:
        fh = open(root / INDEX_NAME, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return out
    with fh:
        for line in fh:
            try:
                e = IndexEntry.model_validate_json(line)
            except ValidationError:
                continue
            out[e.result.run_id] = e
    return out
