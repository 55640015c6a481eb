"""Where a run's LangGraph checkpoints live, and which are kept.

Checkpoints exist so a failed run can be rolled back and resumed. By
default (``storage.checkpoints = "failed"``) every run writes them to its
``run_<r>.checkpoints.sqlite`` and a run that succeeded deletes them when it
ends; ``all`` keeps every run's, ``none`` keeps them in memory only. The
stock LangGraph schema and serializer are used, so LangGraph's own
``SqliteSaver`` reads a kept database.

Measured on a scripted debate run (2026-11-24): its database held ~25 KB
of checkpoints and writes in a 64 KB file of 4 KB pages (four B-trees and
the WAL's slack); with 1 KB pages and a VACUUM when it is kept, ~30 KB.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from descriptor.layout import SQLITE_SIDE_FILES


@contextlib.asynccontextmanager
async def open_checkpointer(path: Path | None) -> AsyncIterator[Any]:
    """A checkpointer writing to ``path`` (SQLite), or an in-memory one when ``path`` is None.

    Each super-step commits; SQLite's default (``synchronous=FULL``) fsyncs
    every commit. ``NORMAL`` keeps the database consistent through any crash
    and still syncs when the WAL is checkpointed, which closing it does; a
    power cut mid-run may lose the last commits, and such a run (no
    ``result.json`` yet) is redone from scratch anyway. The page size is set
    before the saver creates its tables: 1 KB pages waste less of a small
    database than the default 4 KB.
    """
    if path is None:
        yield InMemorySaver()
        return
    async with aiosqlite.connect(str(path)) as conn:
        await conn.execute("PRAGMA page_size=1024")
        await conn.execute("PRAGMA synchronous=NORMAL")
        yield AsyncSqliteSaver(conn)


def keep_or_drop(path: Path, *, keep: bool) -> bool:
    """After the run: compact the database when kept, delete it (and its WAL files) when not; True when kept."""
    if not path.exists():
        return False
    if not keep:
        for p in (path, *(Path(f"{path}{s}") for s in SQLITE_SIDE_FILES)):
            p.unlink(missing_ok=True)
        return False
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    return True


def checkpoint_path(policy: str, path: Path) -> Path | None:
    """The database a run writes under ``storage.checkpoints = policy`` (None: in memory)."""
    return None if policy == "none" else path
