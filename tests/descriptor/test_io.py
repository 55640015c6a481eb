"""Atomic artifact writes."""

import json
import math
import os
from pathlib import Path

import pytest

from descriptor.io import write_json_atomic, write_text_atomic


def test_json_artifacts_read_as_json_dumps_wrote_them(tmp_path):
    data = {"run": "r1", "score": 0.1, "tokens": 12, "ok": True, "none": None, "nested": {"list": [1, 2.5, "é"]}}
    path = write_json_atomic(tmp_path / "a.json", data)
    assert path.read_text(encoding="utf-8") == json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def test_json_artifacts_hold_only_valid_json(tmp_path):
    path = write_json_atomic(tmp_path / "a.json", {"nan": math.nan, "inf": -math.inf, "path": Path("/x"),
                                                    "tuple": (1, 2), "other": object()})
    data = json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(f"wrote {c}"))
    assert data["nan"] is None and data["inf"] is None
    assert data["path"] == "/x" and data["tuple"] == [1, 2] and data["other"].startswith("<object object")


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = write_text_atomic(tmp_path / "a.txt", "old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_json_atomic(path, {"new": 1})
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_a_staged_run_file_is_written_in_place_with_its_secrets_redacted(tmp_path, monkeypatch):
    import tempfile

    def no_temp_file(*_a, **_k):
        raise AssertionError("a staged run file needs no temp file")

    monkeypatch.setattr(tempfile, "mkstemp", no_temp_file)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abcdefghijklmnopqrstuvwx0123")
    path = write_json_atomic(tmp_path / "run_0.eval.json", {"details": "sk-abcdefghijklmnopqrstuvwx0123"},
                             indent=None, durable=False, staged=True)
    assert json.loads(path.read_text()) == {"details": "[REDACTED]"} and os.listdir(tmp_path) == ["run_0.eval.json"]


def test_an_atomic_write_makes_its_directory_replaces_a_stale_temp_file_and_never_follows_a_link(tmp_path):
    import threading

    target = tmp_path / "new" / "dir" / "a.json"
    write_json_atomic(target, {"a": 1})  # the directory is made
    assert target.read_text() == '{\n  "a": 1\n}\n'
    tmp = target.parent / f".{target.name}.{os.getpid()}-{threading.get_ident()}.tmp"
    tmp.write_text("left by a killed process of the same id")
    write_json_atomic(target, {"a": 2})
    assert '"a": 2' in target.read_text() and not tmp.exists()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    tmp.symlink_to(outside)  # a link planted at the temp name is removed, not written through
    write_json_atomic(target, {"a": 3})
    assert outside.read_text() == "keep" and '"a": 3' in target.read_text() and not tmp.is_symlink()


def test_an_atomic_write_is_shared_whatever_the_umask_and_its_errors_name_the_target(tmp_path, monkeypatch):
    old = os.umask(0o077)
    try:
        path = write_text_atomic(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as err:
        write_text_atomic(path, "y")
    assert err.value.filename == str(path) and path.read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]
