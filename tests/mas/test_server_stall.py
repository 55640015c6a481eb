"""The embedded server watched (:mod:`mas.serving.stall`), with a stand-in llama-server process on 127.0.0.1
(:mod:`tests.fake_llama_server`; never the real model): a sweep whose server stops producing tokens, or stops
answering at all, says so, restarts it and retries the calls, instead of waiting half an hour a call; a server
that is slow but working is left alone; the route's request timeout is sized to its longest call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from main import main
from mas.serving import server as llama_server
from mas.serving.process import pid_alive
from mas.serving.stall import read_server

FAKE = Path(__file__).resolve().parents[1] / "fake_llama_server.py"


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """The project's server lifecycle (start, record, watch, restart, release) running the stand-in: what the
    build and the model assembly would give is replaced by an executable named llama-server (PID checks ask
    for that name) and an empty model file. Yields (config file, mode file, starts file)."""
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(FAKE)!r}\n"
                      f"runpy.run_path({str(FAKE)!r}, run_name='__main__')\n")
    binary.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"")
    monkeypatch.setattr(llama_server, "build_server", lambda paths, progress: binary)
    monkeypatch.setattr(llama_server, "ensure_model", lambda settings, progress=None: model)
    mode, starts = tmp_path / "mode", tmp_path / "starts"
    monkeypatch.setenv("FAKE_LLAMA_MODE", str(mode))
    monkeypatch.setenv("FAKE_LLAMA_STARTS", str(starts))
    cfg = tmp_path / "exp.toml"
    cfg.write_text(f"""concurrency = 2
[models.default]
provider = "embedded"
model = "qwen2.5-coder-0.5b"
max_tokens = 64
max_retries = 4
[embedded]
cache_dir = "{tmp_path / 'cache'}"
ctx_size = 2048
parallel = 2
threads = 1
startup_timeout_s = 30
stall_timeout_s = 2
[mas]
builtin_tools = false
""")
    yield cfg, mode, starts
    for handle in list(llama_server._handles.values()):  # stopped by PID, as a run's exit would
        handle.release()
    llama_server._handles.clear()


def sweep(tmp_path: Path, cfg: Path, exp: str) -> int:
    return main(["run", "--config", str(cfg), "--benchmark", "arith", "--systems", "sas", "--task-limit", "2",
                 "--output-root", str(tmp_path / "out"), "--experiment-id", exp, "--progress", "log"])


def started(starts: Path) -> list[tuple[int, str]]:
    return [(int(p), m) for p, m in (ln.split() for ln in starts.read_text().splitlines())]


@pytest.mark.parametrize("mode, says", [("stall", "produced no token for"),
                                        ("silent", "and it answers no health check")])
def test_a_server_that_stops_producing_tokens_is_restarted_and_the_calls_retried(tmp_path, stand_in, capsys,
                                                                                  mode, says):
    cfg, mode_file, starts = stand_in
    mode_file.write_text(mode)
    assert sweep(tmp_path, cfg, "e") == 0
    err = capsys.readouterr().err
    assert says in err and "restarting it; the calls in flight are retried" in err, err[-3000:]
    assert '"server": "embedded server restarted 1x (last after' in err  # the progress line says so
    (first, first_mode), (second, second_mode) = started(starts)
    assert (first_mode, second_mode) == (mode, "ok") and not pid_alive(first) and first != second
    root = tmp_path / "out" / "e"
    results = [json.loads(p.read_text()) for p in sorted(root.rglob("run_0.result.json"))]
    assert len(results) == 2 and all(r["status"] == "finished" for r in results)  # task results, not errors
    errors = [e for p in root.rglob("run_0.trace.jsonl") for e in map(json.loads, p.read_text().splitlines())
              if e["event_type"] == "error"]
    assert errors and all(e["payload"]["kind"] == "llm_call" and e["payload"]["will_retry"] for e in errors)


def test_a_slow_server_that_keeps_producing_tokens_is_left_alone(tmp_path, stand_in, capsys):
    cfg, mode_file, starts = stand_in
    mode_file.write_text("slow:4")  # each call takes twice the stall timeout, writing a token every 0.1 s
    assert sweep(tmp_path, cfg, "e") == 0
    assert len(started(starts)) == 1 and "restarting" not in capsys.readouterr().err


def test_the_watch_reads_llama_servers_progress_counters(tmp_path, stand_in):
    from mas.config import EmbeddedSettings

    cfg, _, _ = stand_in
    handle = llama_server.ensure_server(EmbeddedSettings(cache_dir=str(tmp_path / "cache"), parallel=2,
                                                         ctx_size=2048, startup_timeout_s=30), progress=None)
    seen = read_server(handle.base_url, timeout_s=5)
    assert seen.answered and seen.busy is False and seen.progress == (0.0, 0.0, 0.0)
    assert handle.watch is not None and "--metrics" in llama_server.server_command(
        Path("x"), Path("m"), "n", "127.0.0.1", 1, EmbeddedSettings())


def test_the_embedded_route_waits_for_a_server_slot_and_times_out_after_its_longest_call(tmp_path, stand_in):
    from mas.config import load_config
    from mas.llm.models import make_chat_model

    cfg, _, _ = stand_in
    bound = make_chat_model(load_config(str(cfg)))
    # one slot's context (2048 // 2) read at 10 tokens/s, 64 tokens written at 1 token/s, 30 s more: not 1,800 s
    assert bound.route.request_timeout_s() == pytest.approx(1024 / 10 + 64 + 30)
    assert bound.route.rate_limit.max_concurrent == 2  # the server's slots: no request waits in its queue
