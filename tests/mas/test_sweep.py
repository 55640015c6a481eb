"""Sweeps: resume, integrity, clean stop on signals, manifest, retries, limits, the dask executor."""

from __future__ import annotations

import asyncio
import csv
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from descriptor.events import read_trace
from mas.config import ExperimentConfig, ModelRoute, RateLimit
from descriptor.errors import UserError
from mas.sweep.experiment import ExperimentRequest, SweepInterrupted, run_experiment
from mas.sweep.manifest import MANIFEST_NAME, config_differences
from mas.sweep.progress import LogProgress, SweepStats, make_progress
from mas.scripted.model import ScriptedChatModel
from tests.model_errors import rate_limited, prompt_too_long_error

ROOT = Path(__file__).resolve().parents[2]


def scripted_cfg(tmp_path: Path, *, concurrency: int = 4, latency_ms: float = 0.0, **route: object) -> ExperimentConfig:
    return ExperimentConfig(
        output_root=str(tmp_path), concurrency=concurrency,
        models={"default": ModelRoute(provider="scripted", model="scripted", scripted_latency_ms=latency_ms,
                                      **route)})


def request(cfg: ExperimentConfig, exp: str = "e", *, tasks: int = 3, runs: int = 2, systems=("sas",),
            **kw: object) -> ExperimentRequest:
    return ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=list(systems), task_limit=tasks,
                             runs_per_task=runs, experiment_id=exp, progress="none", **kw)


def file_states(root: Path) -> dict[str, tuple[int, str]]:
    """Relative path -> (mtime_ns, sha256) of every run file under ``root``."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("run_*")) if p.is_file()}


def comparable_results(root: Path) -> dict[str, dict]:
    """Every run's result.json without wall-clock fields and the experiment id."""
    out = {}
    for p in sorted(root.rglob("run_*.result.json")):
        r = json.loads(p.read_text())
        for k in ("wall_time_s", "latency_total_ms"):
            r.pop(k)
        r["run_id"] = r["run_id"].split("/", 1)[1]
        out[str(p.relative_to(root))] = r
    return out


def comparable_summary(root: Path) -> list[dict[str, str]]:
    with open(root / "experiment_summary.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if not k.startswith("latency")} for row in csv.DictReader(fh)]


async def test_resume_skips_finished_runs_and_keeps_their_files(tmp_path):
    cfg = scripted_cfg(tmp_path)
    first = await run_experiment(request(cfg))
    assert len(first) == 6 and all(r.success for r in first)
    root = tmp_path / "e"
    before = file_states(root)
    # Simulate a run killed before its result was written.
    victim = next(root.rglob("run_1.result.json"))
    victim.unlink()
    victim_prefix = str(victim.relative_to(root)).removesuffix(".result.json")
    again = await run_experiment(request(cfg))
    after = file_states(root)
    assert [r.model_dump(exclude={"wall_time_s", "latency_total_ms"}) for r in again] == \
           [r.model_dump(exclude={"wall_time_s", "latency_total_ms"}) for r in first]
    untouched = {k: v for k, v in before.items() if not k.startswith(victim_prefix)}
    assert untouched and all(after[k] == v for k, v in untouched.items())
    redone = [k for k in after if k.startswith(victim_prefix) and k.endswith(".trace.jsonl")]
    assert redone and after[redone[0]][0] > before[redone[0]][0]
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert [(i["skipped"], i["ran"], i["status"]) for i in manifest["invocations"]] == [(0, 6, "finished"),
                                                                                      (5, 1, "finished")]


async def test_interrupted_run_leftovers_are_cleared_and_redone(tmp_path):
    cfg = scripted_cfg(tmp_path)
    await run_experiment(request(cfg, tasks=1, runs=1))
    run_dir = next(d for d in (tmp_path / "e" / "arith" / "sas").iterdir() if d.is_dir())
    good = (run_dir / "run_0.trace.jsonl").read_text()
    # Leftovers of a run killed mid-way: no result, a running status, a trace with a torn last line.
    (run_dir / "run_0.result.json").unlink()
    (run_dir / "run_0.trace.jsonl").write_text(good + '{"seq": 99, "actor": "tor')
    (run_dir / "run_0.answer.txt").write_text("stale")
    [result] = await run_experiment(request(cfg, tasks=1, runs=1))
    assert result.success
    assert (run_dir / "run_0.trace.jsonl").read_text().count("\n") == good.count("\n")
    assert len(read_trace(run_dir / "run_0.trace.jsonl")) == good.count("\n")
    assert (run_dir / "run_0.answer.txt").read_text() != "stale"


async def test_manifest_records_config_runs_and_refuses_a_changed_config(tmp_path):
    cfg = scripted_cfg(tmp_path).model_copy(update={"models": {
        "default": ModelRoute(provider="scripted", model="scripted"),
        "hosted": ModelRoute(base_url="https://example.invalid/v1?key=sk-abcdefghijklmnopqrstuvwxyz012345",
                             api_key_env="HOSTED_KEY")}})
    await run_experiment(request(cfg, tasks=2, runs=1, systems=("sas", "sas")))
    text = (tmp_path / "e" / MANIFEST_NAME).read_text()
    manifest = json.loads(text)
    assert "sk-abcdefghijklmnopqrstuvwxyz012345" not in text and "[REDACTED]" in text
    assert manifest["status"] == "finished" and manifest["experiment_id"] == "e"
    assert manifest["counts"] == {"total": 2, "finished": 2, "errors": 0, "pending": 0, "succeeded": 2, "failed": 0}
    assert manifest["config"]["models"]["hosted"]["api_key_env"] == "HOSTED_KEY"
    run = manifest["runs"][0]
    assert run["run_id"] == "e/arith/sas/arith_0_0000/run_0" and run["status"] == "finished"
    assert run["seed"] == 0 and run["success"] is True and run["tokens_total"] > 0 and run["finished_at"]
    assert manifest["invocations"][0]["request"]["systems"] == ["sas"]
    # A different concurrency resumes; a different model config is refused before any run.
    await run_experiment(request(cfg.model_copy(update={"concurrency": 1}), tasks=2, runs=1))
    changed = cfg.model_copy(update={"seed": 5})
    with pytest.raises(UserError, match=r"different config \(differs in: seed\)"):
        await run_experiment(request(changed, tasks=2, runs=1))


def test_config_differences_names_dotted_keys():
    assert config_differences({"a": {"b": 1, "c": 2}, "concurrency": 1}, {"a": {"b": 1, "c": 3}, "concurrency": 8}) \
        == ["a.c"]


@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setattr("mas.llm.call.backoff_s", lambda attempt, rng: 0.0)


def flaky_model(monkeypatch, fail_first: int):
    """Make every scripted call fail ``fail_first`` times (per call site) with a retryable error."""
    attempts: dict[tuple, int] = {}
    original = ScriptedChatModel._agenerate

    async def flaky(self, messages, stop=None, run_manager=None, **kwargs):
        meta = dict(run_manager.metadata) if run_manager else {}
        key = (id(self), meta.get("contract"), meta.get("mas_actor"), meta.get("mas_step"), len(messages))
        attempts[key] = attempts.get(key, 0) + 1
        if attempts[key] <= fail_first:
            raise rate_limited("429 Too Many Requests")
        return await original(self, messages, stop, run_manager, **kwargs)

    monkeypatch.setattr(ScriptedChatModel, "_agenerate", flaky)
    return attempts


async def test_retries_are_traced_as_error_events_and_runs_succeed(tmp_path, monkeypatch, no_backoff):
    flaky_model(monkeypatch, fail_first=2)
    results = await run_experiment(request(scripted_cfg(tmp_path, max_retries=3), tasks=2, runs=1))
    assert all(r.success and r.error is None for r in results)
    for trace in (tmp_path / "e").rglob("run_0.trace.jsonl"):
        events = read_trace(trace)
        errors = [e for e in events if e.event_type == "error"]
        answers = [e for e in events if e.step_index is not None]
        assert errors and len(errors) == 2 * len(answers)
        assert all(e.payload.will_retry and e.payload.kind == "llm_call" for e in errors)
        assert "429" in errors[0].payload.error and events[-1].event_type != "error"


async def test_exhausted_retries_end_the_run_as_an_error_but_not_the_sweep(tmp_path, monkeypatch, no_backoff):
    flaky_model(monkeypatch, fail_first=10)
    results = await run_experiment(request(scripted_cfg(tmp_path, max_retries=1), tasks=2, runs=1))
    assert len(results) == 2
    assert all(r.status == "error" and not r.success and not r.completion and "LLMCallError" in r.error
               for r in results)
    events = read_trace(next((tmp_path / "e").rglob("run_0.trace.jsonl")))
    llm_errors = [e.payload.will_retry for e in events if getattr(e.payload, "kind", None) == "llm_call"]
    assert llm_errors == [True, False] and events[-1].payload.kind == "run_failed"
    assert "LLMCallError" in events[-1].payload.error
    manifest = json.loads((tmp_path / "e" / MANIFEST_NAME).read_text())
    assert manifest["counts"]["errors"] == 2 and manifest["counts"]["failed"] == 0 and manifest["status"] == "finished"
    assert [r["status"] for r in manifest["runs"]] == ["error", "error"]
    assert [r["attempts"] for r in manifest["runs"]] == [1, 1]


async def test_errored_runs_are_retried_by_the_next_invocation_up_to_retry_errors(tmp_path, monkeypatch, no_backoff):
    flaky_model(monkeypatch, fail_first=10**6)  # the endpoint is down
    cfg = scripted_cfg(tmp_path, max_retries=0)
    await run_experiment(request(cfg, tasks=1, runs=1, retry_errors=1))
    again = await run_experiment(request(cfg, tasks=1, runs=1, retry_errors=1))  # retried: still down
    assert [r.status for r in again] == ["error"]
    manifest = json.loads((tmp_path / "e" / MANIFEST_NAME).read_text())
    assert manifest["runs"][0]["attempts"] == 2 and manifest["invocations"][-1]["ran"] == 1
    third = await run_experiment(request(cfg, tasks=1, runs=1, retry_errors=1))  # out of retries: kept as is
    assert [r.status for r in third] == ["error"]
    manifest = json.loads((tmp_path / "e" / MANIFEST_NAME).read_text())
    assert manifest["runs"][0]["attempts"] == 2 and manifest["invocations"][-1]["ran"] == 0
    monkeypatch.undo()  # the endpoint recovers; a larger --retry-errors retries the run once more
    [result] = await run_experiment(request(cfg, tasks=1, runs=1, retry_errors=5))
    assert result.status == "finished" and result.success
    manifest = json.loads((tmp_path / "e" / MANIFEST_NAME).read_text())
    assert manifest["runs"][0]["attempts"] == 3 and manifest["counts"]["errors"] == 0


async def test_concurrency_bound_is_respected_and_used(tmp_path, monkeypatch):
    import mas.sweep.executors

    active, peak = 0, 0
    real = mas.sweep.executors.execute_run

    async def counting(*args, **kwargs):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            return await real(*args, **kwargs)
        finally:
            active -= 1

    monkeypatch.setattr(mas.sweep.executors, "execute_run", counting)
    results = await run_experiment(request(scripted_cfg(tmp_path, concurrency=3, latency_ms=20), tasks=4, runs=2))
    assert len(results) == 8 and peak == 3


async def test_route_max_concurrent_bounds_llm_calls_across_runs(tmp_path, monkeypatch):
    active, peak = 0, 0
    original = ScriptedChatModel._serve

    async def counting(self, *args):  # the simulated endpoint's work: what max_concurrent bounds
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            return await original(self, *args)
        finally:
            active -= 1

    monkeypatch.setattr(ScriptedChatModel, "_serve", counting)
    cfg = scripted_cfg(tmp_path, concurrency=6, latency_ms=20, rate_limit=RateLimit(max_concurrent=2))
    results = await run_experiment(request(cfg, tasks=3, runs=2))
    assert all(r.success for r in results) and peak == 2


class FakeOpenAI:
    """A loopback OpenAI-compatible chat endpoint that answers every prompt with one final answer.

    ``fail_first`` requests get HTTP 429; each request takes ``delay_s``; ``gzip_body`` compresses replies. It
    records request start times and the peak number of requests in flight.
    """

    def __init__(self, *, delay_s: float = 0.0, fail_first: int = 0, gzip_body: bool = False) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.delay_s, self.fail_first = delay_s, fail_first
        self.starts: list[float] = []
        self.active = self.peak = self.requests = 0
        lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                with lock:
                    fake.requests += 1
                    n = fake.requests
                    fake.starts.append(time.monotonic())
                    fake.active += 1
                    fake.peak = max(fake.peak, fake.active)
                try:
                    time.sleep(fake.delay_s)
                    if n <= fake.fail_first:
                        body, code = {"error": {"message": "rate limited", "type": "rate_limit"}}, 429
                    else:
                        content = json.dumps({"reasoning": "r", "answer_artifact": "7", "confidence": 0.9})
                        body, code = {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": "fake",
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": content}}],
                                      "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}, 200
                finally:
                    # Out of the count before the reply goes out: a client may hand its slot to its next
                    # request as soon as the last byte arrives, before this thread gets past the write.
                    with lock:
                        fake.active -= 1
                data = json.dumps(body).encode()
                self.send_response(code)
                if gzip_body:
                    data = gzip.compress(data)
                    self.send_header("content-encoding", "gzip")
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_openai():
    servers = []

    def make(**kw):
        servers.append(FakeOpenAI(**kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def http_cfg(tmp_path: Path, server: FakeOpenAI, *, concurrency: int, **route: object) -> ExperimentConfig:
    return ExperimentConfig(output_root=str(tmp_path), concurrency=concurrency, models={
        "default": ModelRoute(provider="openai", model="fake", base_url=server.base_url, **route)})


async def test_http_route_retries_429_and_bounds_concurrency(tmp_path, fake_openai, no_backoff):
    server = fake_openai(delay_s=0.05, fail_first=3)
    cfg = http_cfg(tmp_path, server, concurrency=6, max_retries=4, rate_limit=RateLimit(max_concurrent=2))
    results = await run_experiment(request(cfg, tasks=3, runs=2))
    assert len(results) == 6 and all(r.completion and r.error is None for r in results)
    assert server.peak == 2 and server.requests == 6 + 3
    errors = [e for t in (tmp_path / "e").rglob("*.trace.jsonl") for e in read_trace(t) if e.event_type == "error"]
    assert len(errors) == 3 and all(e.payload.will_retry and "RateLimitError" in e.payload.error
                                    for e in errors)


async def test_http_route_requests_per_minute_holds_across_runs(tmp_path, fake_openai):
    server = fake_openai()
    # 600 requests/min = one request start per 100 ms for the endpoint, whatever the number of runs: six
    # concurrent runs span at least 5 intervals. (Single gaps are not compared: on a loaded machine the
    # arrival time jitters by tens of ms after the limiter released the request; without a shared limiter
    # all six would arrive at once.)
    cfg = http_cfg(tmp_path, server, concurrency=6, rate_limit=RateLimit(requests_per_minute=600))
    await run_experiment(request(cfg, tasks=3, runs=2))
    assert len(server.starts) == 6 and server.starts[-1] - server.starts[0] >= 0.4


async def test_sigint_in_process_stops_cleanly(tmp_path):
    cfg = scripted_cfg(tmp_path, concurrency=2, latency_ms=60)
    loop = asyncio.get_running_loop()
    root = tmp_path / "e"
    before = signal.getsignal(signal.SIGINT)

    def kill_when_some_finished():
        if len(list(root.rglob("run_*.result.json"))) >= 2:
            os.kill(os.getpid(), signal.SIGINT)
        else:
            loop.call_later(0.05, kill_when_some_finished)

    loop.call_later(0.05, kill_when_some_finished)
    with pytest.raises(SweepInterrupted) as info:
        await run_experiment(request(cfg, tasks=4, runs=2))
    assert info.value.exit_code == 130 and "SIGINT" in str(info.value)
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["status"] == "interrupted" and manifest["invocations"][-1]["stopped_by"] == "SIGINT"
    assert 2 <= manifest["counts"]["finished"] < 8
    assert signal.getsignal(signal.SIGINT) == before  # the sweep's handlers removed, the earlier one back


async def test_the_sweep_gives_back_the_signal_handlers_it_found(tmp_path):
    """asyncio's removal leaves the default action: a SIGTERM during the summaries or rollbacks after the sweep
    then ended the process without its exit handlers (no word, the embedded server left running)."""
    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, on_term)
    try:
        await run_experiment(request(scripted_cfg(tmp_path), tasks=1, runs=1))
        assert signal.getsignal(signal.SIGTERM) is on_term
    finally:
        signal.signal(signal.SIGTERM, before)


def sigterm_after_finished(proc: subprocess.Popen, root: Path, n: int, *, wait_s: float = 180) -> str:
    """SIGTERM ``proc`` once ``n`` runs under ``root`` have finished; check the exit code, return its stderr."""
    deadline = time.monotonic() + wait_s
    while len(list(root.rglob("run_*.result.json"))) < n and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    return err


def _cli(tmp_path: Path, exp: str, config: Path) -> list[str]:
    return [sys.executable, str(ROOT / "main.py"), "run", "--config", str(config), "--benchmark", "arith",
            "--task-limit", "3", "--runs-per-task", "2", "--systems", "sas", "--model", "scripted",
            "--output-root", str(tmp_path), "--experiment-id", exp, "--progress", "log"]


def test_sigterm_mid_sweep_then_resume_equals_uninterrupted(tmp_path):
    config = tmp_path / "cfg.toml"
    config.write_text('concurrency = 2\n[models.default]\nprovider = "scripted"\n'
                      '[models.scripted]\nprovider = "scripted"\nmodel = "scripted"\nscripted_latency_ms = 150\n')
    root = tmp_path / "killed"
    proc = subprocess.Popen(_cli(tmp_path, "killed", config), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    err = sigterm_after_finished(proc, root, 2)
    assert "interrupted: stopped by SIGTERM" in err
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["status"] == "interrupted" and 2 <= manifest["counts"]["finished"] < 6
    finished = {p.name.split(".")[0]: p.parent for p in root.rglob("run_*.result.json")}
    before = file_states(root)
    kept = {k: v for k, v in before.items()
            if any(k.startswith(str((d / n).relative_to(root)) + ".") for n, d in finished.items())}

    # Resume and the uninterrupted reference in-process (same config file), summaries without plots.
    from descriptor.summaries import summarize_experiment
    from mas.config import load_config

    file_cfg = load_config(config).model_copy(update={"output_root": str(tmp_path)})
    file_cfg = file_cfg.model_copy(update={"models": {"default": file_cfg.models["scripted"]}, "roles": {}})
    for exp in ("killed", "whole"):
        results = asyncio.run(run_experiment(request(file_cfg, exp, tasks=3, runs=2)))
        assert len(results) == 6
        summarize_experiment(tmp_path / exp, plots=False)
    after = file_states(root)
    assert all(after[k] == v for k, v in kept.items()), "a finished run was redone"
    assert comparable_results(root) == comparable_results(tmp_path / "whole")
    assert comparable_summary(root) == comparable_summary(tmp_path / "whole")
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["status"] == "finished" and manifest["counts"]["finished"] == 6
    assert manifest["invocations"][1]["skipped"] == len(finished)


def test_progress_mode_and_eta():
    assert isinstance(make_progress("auto"), LogProgress)  # pytest captures stderr: not a terminal
    stats = SweepStats(total=10, started=time.monotonic() - 4.0)
    assert stats.eta_s() is None
    from descriptor.records import RunResult

    res = RunResult(run_id="x", benchmark="b", system="s", task_id="t", run_index=0, seed=0, success=True,
                    completion=True, score=1.0, answer="1", tokens_total=10, latency_total_ms=1.0,
                    cost_total_usd=0.5, wall_time_s=1.0)
    stats.add(res, skipped=True)
    stats.add(res)
    stats.add(res)
    assert stats.done == 3 and stats.successes == 3 and stats.tokens == 30 and stats.cost_usd == 1.5
    assert stats.eta_s() == pytest.approx(4.0 / 2 * 7, rel=0.05)


async def test_dask_executor_local_cluster_matches_local(tmp_path):
    cfg = scripted_cfg(tmp_path, concurrency=2)
    via_dask = await run_experiment(request(cfg, "d", tasks=2, runs=1, systems=("sas",), executor="dask"))
    via_local = await run_experiment(request(cfg, "l", tasks=2, runs=1, systems=("sas",)))
    strip = {"wall_time_s", "latency_total_ms", "run_id"}
    assert [r.model_dump(exclude=strip) for r in via_dask] == [r.model_dump(exclude=strip) for r in via_local]
    assert comparable_results(tmp_path / "d") == comparable_results(tmp_path / "l")
    manifest = json.loads((tmp_path / "d" / MANIFEST_NAME).read_text())
    assert manifest["invocations"][0]["executor"] == "dask" and manifest["counts"]["finished"] == 2


async def test_dask_executor_on_a_scheduler_address_connects_once(tmp_path, monkeypatch):
    """``--scheduler-address``: the client that checked the address runs the sweep (no second connection)."""
    from distributed import LocalCluster

    import mas.sweep.executors

    connects = []
    real_connect = mas.sweep.executors.connect_scheduler

    async def counting_connect(address, timeout_s=None):
        connects.append(address)
        return await real_connect(address, timeout_s)

    monkeypatch.setattr(mas.sweep.executors, "connect_scheduler", counting_connect)
    cfg = scripted_cfg(tmp_path, concurrency=2)
    async with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, asynchronous=True,
                            dashboard_address=None, protocol="tcp", host="127.0.0.1") as cluster:
        results = await run_experiment(request(cfg, "c", tasks=2, runs=1, executor="dask",
                                               scheduler_address=cluster.scheduler_address))
        assert connects == [cluster.scheduler_address]
        assert len(results) == 2 and all(r.error is None for r in results)
        assert not cluster.scheduler.clients.keys() - {"fire-and-forget"}  # the sweep's client is closed


async def test_dask_worker_processes_match_local(tmp_path, monkeypatch):
    """``--workers 2``: a LocalCluster of two worker processes, each with half of every route limit."""
    import distributed

    started = []
    real_cluster = distributed.LocalCluster

    def recording_cluster(**kw):
        started.append(kw)
        return real_cluster(**kw)

    monkeypatch.setattr(distributed, "LocalCluster", recording_cluster)
    cfg = scripted_cfg(tmp_path, concurrency=3, rate_limit=RateLimit(max_concurrent=4))
    via_dask = await run_experiment(request(cfg, "p", tasks=2, runs=1, executor="dask", workers=2))
    via_local = await run_experiment(request(cfg, "l", tasks=2, runs=1))
    assert [(k["n_workers"], k["processes"], k["threads_per_worker"]) for k in started] == [(2, True, 2)]
    strip = {"wall_time_s", "latency_total_ms", "run_id"}
    assert [r.model_dump(exclude=strip) for r in via_dask] == [r.model_dump(exclude=strip) for r in via_local]
    assert comparable_results(tmp_path / "p") == comparable_results(tmp_path / "l")


def test_per_worker_cfg_divides_every_route_limit():
    from mas.sweep.executors import per_worker_cfg

    cfg = ExperimentConfig(models={
        "default": ModelRoute(provider="scripted", model="s",
                              rate_limit=RateLimit(max_concurrent=16, requests_per_minute=600)),
        "b": ModelRoute(provider="scripted", model="s", rate_limit=RateLimit(max_concurrent=5)),
        "c": ModelRoute(provider="scripted", model="s")})
    split = per_worker_cfg(cfg, 2)
    assert split.models["default"].rate_limit == RateLimit(max_concurrent=8, requests_per_minute=300)
    assert split.models["b"].rate_limit == RateLimit(max_concurrent=2)  # floored: 2 workers never exceed 5
    assert split.models["c"].rate_limit == RateLimit()
    assert per_worker_cfg(cfg, 1) is cfg and cfg.models["default"].rate_limit.max_concurrent == 16


def test_bad_worker_counts_fail_before_any_run(tmp_path):
    cfg = scripted_cfg(tmp_path, rate_limit=RateLimit(max_concurrent=2))
    with pytest.raises(UserError, match="leave out --scheduler-address"):
        asyncio.run(run_experiment(request(cfg, executor="dask", workers=2, scheduler_address="tcp://h:8786")))
    for executor in ("local", "dask"):
        with pytest.raises(UserError, match=r"--workers 3: models\.default\.rate_limit\.max_concurrent is 2"):
            asyncio.run(run_experiment(request(cfg, executor=executor, workers=3)))
    with pytest.raises(UserError, match="--workers must be auto or at least 1"):
        asyncio.run(run_experiment(request(cfg, executor="dask", workers=0)))
    assert not (tmp_path / "e").exists()


def test_bad_executor_options_fail_before_any_run(tmp_path):
    cfg = scripted_cfg(tmp_path)
    with pytest.raises(UserError, match="only used with --executor dask"):
        asyncio.run(run_experiment(request(cfg, scheduler_address="tcp://nowhere:8786")))
    with pytest.raises(UserError, match="unknown executor"):
        asyncio.run(run_experiment(request(cfg, executor="ray")))
    assert not (tmp_path / "e").exists()


def test_a_prompt_over_the_context_is_the_systems_failure_not_an_infrastructure_error(tmp_path, monkeypatch):
    """A model refusing a prompt longer than its context fails the same way on every retry: the run is a task
    result (completion false), not an errored run to retry."""
    import asyncio

    from benchmark.registry import get_benchmark
    from mas.config import ExperimentConfig, ModelRoute
    from mas.scripted.model import ScriptedChatModel
    from mas.sweep.runner import RunSpec, execute_run

    def too_long(self, *a, **k):
        raise prompt_too_long_error("prompt of 9000 tokens exceeds the context of 8192")

    monkeypatch.setattr(ScriptedChatModel, "_respond", too_long)
    cfg = ExperimentConfig(output_root=str(tmp_path), models={"default": ModelRoute(provider="scripted",
                                                                                    model="scripted")})
    bench = get_benchmark("arith", None)
    task = bench.load_tasks(1)[0]
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system="sas", task=task,
                   run_index=0, seed=0)
    result = asyncio.run(execute_run(spec, cfg, bench))
    assert (result.status, result.completion, result.success) == ("finished", False, False)
    assert "BadRequestError" in result.error
    events = read_trace(spec.paths.trace)
    assert events[-1].payload.kind == "prompt_too_long"
