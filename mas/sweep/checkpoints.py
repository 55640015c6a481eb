"""Where a run's LangGraph checkpoints live, and which are kept.

Checkpoints exist so a failed run can be rolled back and resumed. A sweep's
run checkpoints into memory and, when it ends, writes them to its
``run_<r>.checkpoints.sqlite`` only if the storage policy keeps them
(:func:`persist_thread`): by default (``storage.checkpoints = "failed"``) a
run that did not succeed, ``all`` every run, ``none`` none. A rollback
(``resume_run``) forks a copy of that database and checkpoints into SQLite
as it goes. The stock LangGraph schema and serializer format are used, so
LangGraph's own ``SqliteSaver`` reads a kept database.

Checkpoints hold graph state: model replies, tool outputs, error messages.
A key a model echoed, or one inside an endpoint's error body, would land in
the database (and, once written, in SQLite's free pages and WAL even after a
delete), so the serializer masks secrets *before* any byte reaches SQLite:
:class:`RedactingSerializer` wraps LangGraph's own serializer and overwrites
every secret (:func:`descriptor.redact.mask_secret_bytes`, same length, so
msgpack stays valid and LangGraph's stock savers still read it). A sweep's
in-memory checkpoints are masked as :func:`persist_thread` writes them out.

Measured on a scripted debate run: its database held ~25 KB
of checkpoints and writes in a 64 KB file of 4 KB pages (four B-trees and
the WAL's slack); with 1 KB pages and a VACUUM when it is kept, ~30 KB.
A kept database is then gzipped (:func:`pack_database`,
``run_<r>.checkpoints.sqlite.gz``): msgpack of repeated messages and half-empty
pages compress 6-8x (a 21-86 KB database of a scripted failed run became
3-11 KB; 50 KB a failed run on average, 9 KB a run of a scripted sweep, was
the largest part of its disk after the trace). ``gunzip -k`` gives back the
stock database; a rollback decompresses it into its own copy.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import sqlite3
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from descriptor.errors import UserError
from descriptor.io import write_bytes_atomic
from descriptor.layout import SUFFIXES, database_files
from descriptor.redact import mask_secret_bytes
from mas.logging import get_logger

log = get_logger(__name__)


class RedactingSerializer:
    """LangGraph's ``SerializerProtocol``: ``inner``'s bytes with every secret masked; loading is ``inner``'s."""

    def __init__(self, inner: Any | None = None) -> None:
        self.inner = inner or JsonPlusSerializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.inner.dumps_typed(obj)
        return type_, mask_secret_bytes(data)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)


@contextlib.asynccontextmanager
async def open_checkpointer(path: Path | InMemorySaver | None) -> AsyncIterator[Any]:
    """A checkpointer writing to ``path`` (SQLite), or an in-memory one when ``path`` is None (``path`` itself
    when it is one: the caller keeps it to persist what the storage policy keeps, :func:`persist_thread`).

    Each super-step commits; SQLite's default (``synchronous=FULL``) fsyncs
    every commit. ``NORMAL`` keeps the database consistent through any crash
    and still syncs when the WAL is checkpointed, which closing it does; a
    power cut mid-run may lose the last commits, and such a run (no
    ``result.json`` yet) is redone from scratch anyway. The page size is set
    before the saver creates its tables: 1 KB pages waste less of a small
    database than the default 4 KB.
    """
    if path is None or isinstance(path, InMemorySaver):
        yield memory_saver() if path is None else path
        return
    async with aiosqlite.connect(str(path)) as conn:
        await conn.execute("PRAGMA page_size=1024")
        await conn.execute("PRAGMA synchronous=NORMAL")
        yield AsyncSqliteSaver(conn, serde=RedactingSerializer())


def memory_saver() -> InMemorySaver:
    """An in-memory checkpointer with LangGraph's own serializer: nothing in it reaches a file unmasked, since
    :func:`persist_thread` masks every byte it writes out (masking each of a run's ~100 serializations as
    they happen was ~1 ms of a 40 ms scripted run, for the few runs the storage policy keeps)."""
    return InMemorySaver()


def persist_thread(memory: InMemorySaver, thread_id: str, path: Path) -> None:
    """Write thread ``thread_id``'s checkpoints and pending writes from ``memory`` to a new SQLite database
    ``path``, in LangGraph's stock schema (what :class:`AsyncSqliteSaver` would have written during the run).

    A run checkpoints into memory and only a run the storage policy keeps (by default a failed one) is
    written out, once, at its end: SQLite commits on every super-step were ~25 ms of a 70 ms scripted run,
    and a successful run then deleted them. The file is complete before ``result.json`` is written, so a
    finished run's database is always there; a run cut short has no ``result.json`` and is redone.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    remove_database(path)
    with contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        conn.execute("PRAGMA page_size=1024")  # before the tables: see open_checkpointer
        saver = SqliteSaver(conn, serde=RedactingSerializer())
        saver.setup()
        conn.execute("PRAGMA synchronous=NORMAL")  # one commit below; closing checkpoints the WAL with a sync
        tuples = list(memory.list({"configurable": {"thread_id": thread_id}}))
        with conn:  # one transaction
            for tup in reversed(tuples):  # oldest first, as they were made
                conf = tup.config["configurable"]
                parent = {"thread_id": thread_id, "checkpoint_ns": conf.get("checkpoint_ns", "")}
                if tup.parent_config is not None:
                    parent["checkpoint_id"] = tup.parent_config["configurable"]["checkpoint_id"]
                conn.execute(
                    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (thread_id, parent["checkpoint_ns"], tup.checkpoint["id"], parent.get("checkpoint_id"),
                     *saver.serde.dumps_typed(tup.checkpoint), mask_secret_bytes(
                         json.dumps(tup.metadata, ensure_ascii=False).encode("utf-8", "ignore"))))
            # pending writes as stored (serialized, not yet masked, with their own index and task path)
            conn.executemany(
                "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
                "channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(tid, ns, cid, task_id, task_path, idx, channel, typed[0], mask_secret_bytes(typed[1]))
                 for (tid, ns, cid), rows in memory.writes.items() if tid == thread_id
                 for (_, idx), (task_id, channel, typed, task_path) in rows.items()])


BUSY_TIMEOUT_S = 30.0
"""How long compaction waits for another connection to let go of a database (seconds)."""


def keep_or_drop(path: Path, *, keep: bool) -> bool:
    """After the run: compact the database when kept, delete it (and its WAL files) when not; True when kept."""
    if not path.exists():
        return False
    if not keep:
        remove_database(path)
        return False
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
    except sqlite3.OperationalError as err:
        # Compaction only saves disk; the database is complete without it, so a busy file is kept as it is.
        log.warning("checkpoints kept uncompacted", path=str(path), error=str(err))
    return True


PACKED_SUFFIX = SUFFIXES["checkpoints_packed"].removeprefix(SUFFIXES["checkpoints"])
"""What :func:`pack_database` adds to a kept database's name (``.gz``)."""


def pack_database(path: Path) -> Path:
    """Replace the (compacted, closed) database ``path`` by its gzip, ``<path>.gz``; return the packed path.

    Written atomically and durably (a rollback trusts it once ``result.json`` names the run finished) before
    the plain file goes, so a crash between the two leaves both, never neither.
    """
    packed = path.with_name(path.name + PACKED_SUFFIX)
    write_bytes_atomic(packed, gzip.compress(path.read_bytes(), compresslevel=9, mtime=0))
    remove_database(path)
    return packed


def _database_bytes(db: Path) -> bytes:
    """The SQLite bytes of ``db``, decompressed when it is packed; :class:`UserError` naming it when unreadable."""
    try:
        data = db.read_bytes()
        return gzip.decompress(data) if db.name.endswith(PACKED_SUFFIX) else data
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise UserError(f"{db}: not a readable checkpoint database ({err})") from None


def copy_database(source: Path, dest: Path) -> None:
    """Copy the SQLite file ``source`` (decompressed when packed) to ``dest``, first removing ``dest``'s side
    files (a stale WAL beside a fresh copy would be replayed into it)."""
    remove_database(dest)
    if source.name.endswith(PACKED_SUFFIX):
        dest.write_bytes(_database_bytes(source))
    else:
        shutil.copyfile(source, dest)


def remove_database(path: Path) -> None:
    """Delete the SQLite database ``path`` and its side files, whichever exist."""
    for p in database_files(path):
        p.unlink(missing_ok=True)


def check_checkpoint(db: Path, *, thread_id: str, checkpoint_id: str) -> None:
    """Raise :class:`UserError` naming ``db`` unless it is a sound SQLite database holding that checkpoint.

    A rollback forks a run at one checkpoint; from a damaged or foreign file
    it would fail midway (and used to be counted as a failed rollback).
    """
    if not db.is_file():
        raise UserError(f"{db}: checkpoint database not found; the run cannot be resumed")
    try:
        with contextlib.closing(read_only_connection(db)) as conn:
            check = conn.execute("PRAGMA quick_check").fetchone()
            if not check or check[0] != "ok":
                raise UserError(f"{db}: damaged checkpoint database (quick_check: {check[0] if check else 'no answer'})")
            found = conn.execute("SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ? LIMIT 1",
                                 (thread_id, checkpoint_id)).fetchone()
    except sqlite3.Error as err:
        raise UserError(f"{db}: not a readable checkpoint database ({err})") from None
    if found is None:
        raise UserError(f"{db}: holds no checkpoint {checkpoint_id} of thread {thread_id!r}; the run cannot be "
                        "resumed from that step")


def read_only_connection(db: Path) -> sqlite3.Connection:
    """A read-only connection to ``db``; a packed one is decompressed into memory (``deserialize``)."""
    if db.name.endswith(PACKED_SUFFIX):
        data = bytearray(_database_bytes(db))
        # Header bytes 18-19 say "WAL" for a database last written in WAL mode, and an in-memory database
        # cannot open a WAL: read it as a rollback-journal database (the data pages are the same).
        if len(data) >= 20 and data[18:20] == b"\x02\x02":
            data[18:20] = b"\x01\x01"
        conn = sqlite3.connect(":memory:")
        conn.deserialize(bytes(data))
        return conn
    from urllib.parse import quote

    # immutable: no -wal/-shm files appear beside the run's own database (its files are never touched)
    return sqlite3.connect(f"file:{quote(str(db))}?mode=ro&immutable=1", uri=True)
