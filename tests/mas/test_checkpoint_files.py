"""The checkpoint database after a run: compacted when kept, even when busy never a crash; a copy is clean."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from descriptor.errors import UserError
from mas.sweep import checkpoints
from mas.sweep.checkpoints import check_checkpoint, copy_database, keep_or_drop, pack_database


def _db(path: Path, rows: int = 50) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 200,)] * rows)
        conn.commit()


def _rows(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT count(*) FROM t").fetchone()[0]


def test_a_kept_database_is_compacted_and_a_dropped_one_goes_with_its_side_files(tmp_path):
    kept, dropped = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _db(kept)
    _db(dropped)
    Path(f"{dropped}-wal").write_bytes(b"stale")
    assert keep_or_drop(kept, keep=True) and _rows(kept) == 50
    assert not keep_or_drop(dropped, keep=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite"]


def test_a_busy_database_is_kept_uncompacted_not_a_crash(tmp_path, monkeypatch):
    """A rollback sweep crashed on ``VACUUM``: 'database is locked'. Compaction is optional; the data is not."""
    monkeypatch.setattr(checkpoints, "BUSY_TIMEOUT_S", 0.1)
    db = tmp_path / "run_0.checkpoints.sqlite"
    _db(db)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert keep_or_drop(db, keep=True) is True
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert _rows(db) == 50


def test_a_copy_never_meets_the_stale_wal_of_an_earlier_attempt(tmp_path):
    src, dest = tmp_path / "src.sqlite", tmp_path / "dest.sqlite"
    _db(src, rows=3)
    keep_or_drop(src, keep=True)
    _db(dest, rows=7)  # an earlier, interrupted attempt: its WAL is still beside it
    for side in ("-wal", "-shm"):
        Path(f"{dest}{side}").write_bytes(Path(f"{dest}{side}").read_bytes() if Path(f"{dest}{side}").exists() else b"x")
    copy_database(src, dest)
    assert not Path(f"{dest}-wal").exists() and not Path(f"{dest}-shm").exists()
    assert _rows(dest) == 3


def test_a_kept_database_is_packed_smaller_and_a_copy_of_it_is_the_stock_database(tmp_path):
    """Issue 33: a failed run's checkpoints were ~9 KB of every run's disk; gzipped they take a fraction."""
    db = tmp_path / "run_0.checkpoints.sqlite"
    _db(db, rows=200)
    keep_or_drop(db, keep=True)
    plain = db.stat().st_size
    packed = pack_database(db)
    assert packed.name == "run_0.checkpoints.sqlite.gz" and not db.exists()
    assert packed.stat().st_size * 4 < plain
    copy = tmp_path / "run_0.rollback_1.checkpoints.sqlite"
    copy_database(packed, copy)
    assert _rows(copy) == 200  # LangGraph's own SqliteSaver opens the copy as before


def test_a_packed_database_is_checked_like_a_plain_one(tmp_path):
    """A rollback checks the run's checkpoint before it forks: in the gzipped database as in the plain one."""
    db = tmp_path / "run_0.checkpoints.sqlite"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # as LangGraph's saver leaves it: the header says WAL
        conn.execute("CREATE TABLE checkpoints (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT)")
        conn.execute("INSERT INTO checkpoints VALUES ('t', '', 'c1')")
        conn.commit()
    keep_or_drop(db, keep=True)
    packed = pack_database(db)
    check_checkpoint(packed, thread_id="t", checkpoint_id="c1")
    with pytest.raises(UserError, match="holds no checkpoint c2"):
        check_checkpoint(packed, thread_id="t", checkpoint_id="c2")
    packed.write_bytes(packed.read_bytes()[:40])  # cut short
    with pytest.raises(UserError, match="run_0.checkpoints.sqlite.gz: not a readable checkpoint database"):
        check_checkpoint(packed, thread_id="t", checkpoint_id="c1")
