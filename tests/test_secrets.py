"""Secrets never reach an artifact: registered key variables whatever their name, key-shaped values, text,
JSON, binary checkpoint data, and the refusal to run model-written code without the isolation asked for."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid

import pytest

from descriptor.io import write_json_atomic, write_text_atomic
from descriptor.redact import REDACTED, looks_like_key, mask_secret_bytes, redact, register_secret_env
from mas.config import ExperimentConfig, ModelRoute


def test_a_routes_key_variable_is_a_secret_whatever_its_name(monkeypatch, tmp_path):
    key = f"opaque~{uuid.uuid4().hex}"  # no key shape, no secret-sounding name
    monkeypatch.setenv("ROUTE_SESAME_1", key)
    assert redact(f"x {key} y") == f"x {key} y"  # not yet known as a secret
    ExperimentConfig(models={"default": ModelRoute(provider="openai", model="m", api_key_env="ROUTE_SESAME_1")})
    assert redact(f"x {key} y") == f"x {REDACTED} y"
    write_json_atomic(tmp_path / "a.json", {"error": f"401: {key}", "nested": [key]})
    write_text_atomic(tmp_path / "a.txt", f"answer {key}")
    assert all(key.encode() not in p.read_bytes() for p in tmp_path.iterdir())


def test_environment_values_shaped_like_keys_are_secrets(monkeypatch):
    value = "zz9" + uuid.uuid4().hex + "Q"
    monkeypatch.setenv("SOME_SETTING", value)
    assert looks_like_key(value) and redact(value) == REDACTED
    assert not looks_like_key("0123456789abcdef0123456789abcdef01234567")  # a git commit id
    assert not looks_like_key("/usr/local/bin:/usr/bin") and not looks_like_key("short1")


def test_binary_masking_keeps_lengths(monkeypatch):
    key = f"opaque~{uuid.uuid4().hex}"
    monkeypatch.setenv("ROUTE_SESAME_2", key)
    register_secret_env(["ROUTE_SESAME_2"])
    data = b"\xa5" + key.encode() + b"\x00 Bearer abcdefghijklmnopqrstuvwxyz"
    masked = mask_secret_bytes(data)
    assert len(masked) == len(data) and key.encode() not in masked and b"abcdefghijklmnop" not in masked


def test_checkpoints_never_hold_a_secret(monkeypatch, tmp_path):
    from mas.sweep.checkpoints import open_checkpointer

    key = f"opaque~{uuid.uuid4().hex}"
    monkeypatch.setenv("ROUTE_SESAME_3", key)
    register_secret_env(["ROUTE_SESAME_3"])
    db = tmp_path / "c.sqlite"

    async def roundtrip():
        async with open_checkpointer(db) as saver:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            checkpoint = {"v": 1, "id": "1", "ts": "2024-01-01T00:00:00+00:00", "channel_values":
                          {"answer": f"the key is {key}", "n": 3}, "channel_versions": {}, "versions_seen": {}}
            saved = await saver.aput(config, checkpoint, {}, {})
            await saver.aput_writes(saved, [("answer", f"again {key}")], task_id="task")
            return await saver.aget_tuple(saved)

    got = asyncio.run(roundtrip())
    assert got.checkpoint["channel_values"]["n"] == 3 and key not in got.checkpoint["channel_values"]["answer"]
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert key.encode() not in raw and key.split("~")[1].encode() not in raw
    with sqlite3.connect(db) as conn:  # the masked value is still a readable string of the same length
        assert conn.execute("SELECT count(*) FROM writes").fetchone()[0] == 1


def test_namespaces_unavailable_refuses_to_run_code_unless_opted_out(monkeypatch):
    import benchmark.sandbox as sandbox
    from descriptor.errors import UserError
    from mas.sweep.benchmarks import check_isolation, run_benchmark

    monkeypatch.setattr(sandbox.shutil, "which", lambda *a, **k: None)  # no unshare on this machine
    monkeypatch.setattr(sandbox, "_probe", [])
    with pytest.raises(sandbox.SandboxUnavailable, match="unshare"):
        sandbox.run_python("print(1)")
    assert sandbox.run_python("print(1)", isolation="unsafe-no-namespaces").stdout == "1\n"
    cfg = ExperimentConfig()
    with pytest.raises(UserError, match=r'sandbox.isolation = "namespaces".*unsafe-no-namespaces'):
        check_isolation(cfg, {"humaneval": run_benchmark(cfg, "humaneval")})
    unsafe = ExperimentConfig(sandbox={"isolation": "unsafe-no-namespaces"})
    bench = run_benchmark(unsafe, "humaneval")  # the benchmark's isolation follows sandbox.isolation
    assert bench.sandbox_isolation() == "unsafe-no-namespaces"
    check_isolation(unsafe, {"humaneval": bench})
    mixed = ExperimentConfig(sandbox={"isolation": "unsafe-no-namespaces"},
                             benchmarks={"humaneval": {"isolation": "namespaces"}})
    with pytest.raises(UserError, match=r'benchmarks.humaneval.isolation = "namespaces"'):
        check_isolation(mixed, {"humaneval": run_benchmark(mixed, "humaneval")})
