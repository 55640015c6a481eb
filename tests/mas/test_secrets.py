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


def test_a_runs_in_memory_checkpoints_are_masked_when_they_are_written_out(monkeypatch, tmp_path):
    from mas.sweep.checkpoints import memory_saver, persist_thread

    key = f"opaque~{uuid.uuid4().hex}"
    monkeypatch.setenv("ROUTE_SESAME_4", key)
    register_secret_env(["ROUTE_SESAME_4"])
    memory = memory_saver()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = {"v": 1, "id": "1", "ts": "2024-01-01T00:00:00+00:00", "channel_values":
                  {"answer": f"the key is {key}", "n": 3}, "channel_versions": {"answer": 1, "n": 1},
                  "versions_seen": {}}
    saved = memory.put(config, checkpoint, {"source": "loop", "note": key}, {"answer": 1, "n": 1})
    memory.put_writes(saved, [("answer", f"again {key}")], task_id="task")
    db = tmp_path / "c.sqlite"
    persist_thread(memory, "t", db)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert key.split("~")[1].encode() not in raw
    with sqlite3.connect(db) as conn:  # everything was written out, masked in place
        assert conn.execute("SELECT count(*) FROM writes").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 1


def test_namespaces_unavailable_refuses_to_run_code_unless_opted_out(monkeypatch):
    import benchmark.sandbox.process as sandbox
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


def test_credentials_in_a_routes_url_reach_no_artifact_and_no_output(tmp_path, endpoint):
    """A password in ``base_url``'s userinfo and an ``?api-key=`` query landed verbatim in every run's metadata
    and in the manifest; the one writer now redacts a URL's credentials wherever they appear."""
    from tests.fake_endpoint import answer
    from tests.mas.test_hostile_endpoint import assert_nowhere, planted_key, run_cli, write_config

    password, query_key = f"pw{uuid.uuid4().hex[:12]}", f"qk{uuid.uuid4().hex[:12]}"
    server = endpoint(lambda n, req: answer("7", n))
    url = server.base_url.replace("http://", f"http://sesame:{password}@") + f"?api-key={query_key}"
    proc = run_cli(tmp_path, write_config(tmp_path, url), planted_key(), benchmark="arith", systems="sas")
    root = tmp_path / "out" / "e"
    assert (root / "manifest.json").is_file() and list(root.rglob("run_0.metadata.json")), proc.stderr[-3000:]
    for secret in (password, query_key):
        assert_nowhere(f"x~{secret}", tmp_path / "out", proc.stdout, proc.stderr)
    (config,) = (root / "configs").iterdir()  # the runs' config, stored once (named by their metadata's hash)
    text = config.read_text()
    assert f"sesame:{REDACTED}" not in text and f"http://{REDACTED}@127.0.0.1" in text


def test_url_credentials_are_redacted_in_text_and_bytes():
    text = "POST http://bob:hunter2hunter2@h:8/v1?model=m&api-key=abc123xyz&token=t0k3n#f failed"
    assert redact(text) == f"POST http://{REDACTED}@h:8/v1?model=m&api-key={REDACTED}&token={REDACTED}#f failed"
    data = text.encode()
    masked = mask_secret_bytes(data)
    assert len(masked) == len(data) and b"hunter2" not in masked and b"abc123xyz" not in masked
    assert redact("see https://example.com/a?b=1 and mailto:x@y.z") == "see https://example.com/a?b=1 and mailto:x@y.z"


def test_the_exporter_process_gets_its_url_outside_argv():
    """``ps`` shows every local user a process's argv: the exporter's URL (maybe ``http://user:pw@host``) is
    handed over in its environment."""
    from pathlib import Path

    from mas.otel.sidecar import Sidecar

    car = Sidecar("http://otel:pw-in-argv@127.0.0.1:9/v1/traces")
    try:
        cmdline = Path(f"/proc/{car.proc.pid}/cmdline").read_bytes()
    finally:
        car.close(timeout_s=20)
    assert b"pw-in-argv" not in cmdline and b"mas.otel.sidecar" in cmdline


def test_the_rollback_progress_file_holds_no_secret(monkeypatch, tmp_path):
    from attribution.rollback.progress import PROGRESS_FILE, RollbackProgress
    from descriptor.records import RollbackRecord

    key = f"opaque~{uuid.uuid4().hex}"
    monkeypatch.setenv("ROUTE_SESAME_3", key)
    register_secret_env(["ROUTE_SESAME_3"])
    rec = RollbackRecord(run=str(tmp_path / "t" / "run_0"), rollback_index=0, strategy="restart", set=[0],
                         restart_step=0, n_steps=1, steps_redone=1, cost=1.0, tokens=5, success=False,
                         answer=f"the key is {key}", decisive_step=None, covered=None, wall_time_s=0.1,
                         error=None)
    progress = RollbackProgress(tmp_path / "out", tmp_path)
    progress.add("restart", {}, rec)
    text = (tmp_path / "out" / PROGRESS_FILE).read_text()
    assert key not in text and REDACTED in text
