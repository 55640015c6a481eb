"""The checkpoint database after a run: compacted when kept, even when busy never a crash; a copy is clean."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from mas.sweep import checkpoints
from mas.sweep.checkpoints import copy_database, keep_or_drop


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
