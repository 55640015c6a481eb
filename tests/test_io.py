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
