"""Span ids in traces, OpenTelemetry export to an in-process OTLP receiver, and replay with ``export-otel``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.base import Task
from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from descriptor.redact import REDACTED
from mas.config import ExperimentConfig, ModelRoute, TracingSettings
from mas.otel import export_endpoint
from mas.otel.mapping import is_model_event
from mas.otel.receiver import OtlpReceiver
from mas.sweep.runner import RunSpec, execute_run
from tests.otel_helpers import (
    HEX16,
    by_trace,
    chat_token_sums,
    check_tree,
    jsonl_tokens,
    kinds,
    runs_of,
    scripted_sweep,
)

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "experiment"


def _dicts(rx: OtlpReceiver) -> list[dict]:
    return [dataclasses.asdict(s) for s in rx.spans]


def test_every_event_has_its_span_and_parent(tmp_path, monkeypatch):
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    exp = scripted_sweep(tmp_path)
    assert len(runs_of(exp)) == 4
    for trace, meta in runs_of(exp):
        trace_id = meta["otel_trace_id"]
        assert trace_id and len(trace_id) == 32
        root = trace_id[16:]
        events = read_trace(trace)
        nodes = set()
        for ev in events:
            assert HEX16.match(ev.span_id) and (ev.parent_span_id is None or HEX16.match(ev.parent_span_id)), ev
            if is_model_event(ev) or ev.event_type in ("tool_call", "tool_result"):
                assert ev.parent_span_id not in (None, ev.span_id), ev  # a call or tool run inside a node
                nodes.add(ev.parent_span_id)
            else:  # an event of its node (or of the root)
                assert ev.parent_span_id == (root if ev.span_id != root else None), ev
        assert root not in nodes
        tool_results = [e.span_id for e in events if e.event_type == "tool_result"]
        assert len(set(tool_results)) == len(tool_results)
        # each model call is one chat span: a call's tool_call events share it, different calls never do
        calls = {(e.span_id, e.parent_span_id) for e in events if is_model_event(e) or e.event_type == "tool_call"}
        assert len({s for s, _ in calls}) == len(calls)
        assert len(calls) == sum(1 for e in events if is_model_event(e) and e.event_type != "verify"
                                 or e.event_type == "verify" and e.token_in > 0)


def test_sweep_exports_every_run_to_an_otlp_receiver(tmp_path, monkeypatch):
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.base_url)
        exp = scripted_sweep(tmp_path, systems=["sas", "debate", "supervisor"], tasks=2, runs=1)
        spans = _dicts(rx)
    runs = runs_of(exp)
    traces = by_trace(spans)
    assert len(runs) == 6 and set(traces) == {m["otel_trace_id"] for _, m in runs}
    for trace, meta in runs:
        got = traces[meta["otel_trace_id"]]
        root = check_tree(got)
        a = root["attributes"]
        assert (a["mas.experiment_id"], a["mas.benchmark"], a["mas.system"], a["mas.task_id"], a["mas.run_index"],
                a["mas.seed"]) == ("x", "arith", meta["system"], meta["task_id"], meta["run_index"], meta["seed"])
        assert a["gen_ai.operation.name"] == "invoke_workflow" and root["resource"]["service.name"] == "mas-econ"
        assert chat_token_sums(got) == jsonl_tokens(trace)
        events = read_trace(trace)
        assert {e.span_id for e in events} <= {s["span_id"] for s in got}
        k = kinds(got)
        assert k["chat"] >= 1 and k["invoke_agent"] >= 1
        assert k["execute_tool"] == sum(e.event_type == "tool_result" for e in events)
        for s in got:
            attrs = s["attributes"]
            # no message contents without tracing.record_inputs
            assert not {"gen_ai.input.messages", "gen_ai.output.messages", "mas.content", "mas.answer_artifact",
                        "mas.output", "mas.arguments"} & set(attrs), s["name"]
            if s["name"].startswith("chat "):
                assert attrs["gen_ai.operation.name"] == "chat" and s["kind"] == 3  # SPAN_KIND_CLIENT
                assert attrs["gen_ai.provider.name"] == "mas.scripted" and attrs["gen_ai.request.model"] == "scripted"
                assert attrs["gen_ai.agent.name"]
            if s["name"].startswith("execute_tool "):
                assert attrs["gen_ai.tool.name"] == s["name"].split()[1]
        if meta["system"] == "debate":
            decisions = [e for s in got for e in s["events"] if e[0] == "mas.termination_decision"]
            assert len(decisions) == sum(e.payload.kind == "termination" for e in events)
            assert all("mas.stop" in attrs for _, _, attrs in decisions)


def test_record_inputs_keeps_messages_and_leaks_no_secret(tmp_path, monkeypatch):
    secret = "hunter2-very-secret-value"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    question = f"What is 2 + 3? (key sk-abcdefghijklmnopqrstuvwx, token {secret})"
    bench = get_benchmark("arith", None)
    with OtlpReceiver() as rx:
        cfg = ExperimentConfig(output_root=str(tmp_path), models={"default": ModelRoute(provider="scripted",
                                                                                          model="scripted")},
                               tracing=TracingSettings(otlp_endpoint=rx.base_url, record_inputs=True))
        spec = RunSpec(experiment_id="x", output_root=tmp_path, benchmark="arith", system="sas",
                       task=Task(task_id="t", question=question, reference="5"), run_index=0, seed=0)
        asyncio.run(execute_run(spec, cfg, bench))
        from mas.otel.sidecar import flush_all

        assert flush_all()
        spans = _dicts(rx)
    model_events = [e for e in read_trace(spec.paths.trace) if is_model_event(e)]
    assert model_events and all(e.payload.input_messages for e in model_events)
    first = model_events[0].payload.input_messages
    assert [m.role for m in first] == ["system", "user"] and "What is 2 + 3?" in first[1].content
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".json", ".md"):
            text = path.read_text(encoding="utf-8")
            assert secret not in text and "sk-abcdefghij" not in text, path
    assert REDACTED in spec.paths.trace.read_text(encoding="utf-8")
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert chats and all("gen_ai.input.messages" in s["attributes"] for s in chats)
    msgs = json.loads(chats[0]["attributes"]["gen_ai.input.messages"])
    assert msgs[1]["role"] == "user" and "What is 2 + 3?" in msgs[1]["parts"][0]["content"]
    assert secret not in json.dumps(spans) and "sk-abcdefghij" not in json.dumps(spans)


def test_export_is_off_without_an_endpoint_and_loads_no_exporter(tmp_path):
    code = ("import sys; from pathlib import Path; from tests.otel_helpers import scripted_sweep; "
            f"scripted_sweep(Path({str(tmp_path)!r}), systems=['sas']); "
            "print(sorted(m for m in ('mas.otel.export', 'mas.otel.sidecar', 'opentelemetry.exporter.otlp.proto.http') if m in sys.modules))")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_export_endpoint_settings(monkeypatch):
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
                "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(var, raising=False)
    cfg = ExperimentConfig()
    assert export_endpoint(cfg) is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")
    assert export_endpoint(cfg) == "http://127.0.0.1:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9999/custom")
    assert export_endpoint(cfg) == "http://127.0.0.1:9999/custom"
    on = cfg.model_copy(update={"tracing": TracingSettings(otlp_endpoint="http://127.0.0.1:6006")})
    assert export_endpoint(on) == "http://127.0.0.1:6006/v1/traces"
    assert export_endpoint(cfg.model_copy(update={"tracing": TracingSettings(export=False)})) is None
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert export_endpoint(on) is None


def _export_otel(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    return subprocess.run([sys.executable, "main.py", "export-otel", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_export_otel_replays_version_1_traces_with_derived_parents():
    with OtlpReceiver() as rx:
        out = _export_otel("--experiment-root", str(GOLDEN), "--endpoint", rx.base_url)
        spans = _dicts(rx)
    assert out.returncode == 0, out.stderr
    traces = by_trace(spans)
    golden = sorted(GOLDEN.rglob("run_*.trace.jsonl"))
    assert len(traces) == len(golden) == 8 and f"exported 8 run(s), {len(spans)} spans" in out.stdout
    sums = sorted(jsonl_tokens(t) for t in golden)
    assert sorted(chat_token_sums(t) for t in traces.values()) == sums
    for got in traces.values():
        check_tree(got)
        events_start = min(s["start_ns"] for s in got)
        assert events_start > 1_600_000_000 * 10**9  # the traces' own timestamps, not the time of the replay
    # debaters of one round ran from one checkpoint: one agent span each, not one for the round
    debate = next(t for t in traces.values() if any(s["attributes"].get("mas.system") == "debate" for s in t))
    agents = [s["attributes"]["gen_ai.agent.name"] for s in debate if s["name"].startswith("invoke_agent")]
    assert {"debater_0", "debater_1", "debater_2", "system:controller", "system:judge"} <= set(agents)


def test_export_otel_replays_a_live_exported_run_with_the_same_ids(tmp_path, monkeypatch):
    with OtlpReceiver() as live:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", live.base_url)
        exp = scripted_sweep(tmp_path, systems=["debate", "orchestrator"])
        live_spans = _dicts(live)
    with OtlpReceiver() as rx:
        out = _export_otel("--experiment-root", str(exp), "--endpoint", rx.base_url)
        replayed = _dicts(rx)
    assert out.returncode == 0, out.stderr

    def shape(spans):
        return sorted((s["trace_id"], s["span_id"], s["parent_span_id"] or "", s["name"]) for s in spans)

    assert shape(replayed) == shape(live_spans)
    assert sorted(chat_token_sums(t) for t in by_trace(replayed).values()) == \
        sorted(chat_token_sums(t) for t in by_trace(live_spans).values())


def test_export_otel_bad_input_is_a_clear_error(tmp_path):
    out = _export_otel("--experiment-root", str(GOLDEN))
    assert out.returncode == 2 and "no OTLP endpoint" in out.stderr and "Traceback" not in out.stderr
    out = _export_otel("--experiment-root", str(tmp_path / "missing"), "--endpoint", "http://127.0.0.1:9")
    assert out.returncode == 2 and "directory not found" in out.stderr
    out = _export_otel("--experiment-root", str(GOLDEN), "--endpoint", "127.0.0.1:4318")
    assert out.returncode == 2 and "expected an http" in out.stderr


@pytest.mark.parametrize("bad", ["127.0.0.1:6006", "ftp://x"])
def test_tracing_config_names_a_bad_endpoint(bad):
    from mas.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match="tracing.otlp_endpoint"):
        parse_config({"tracing": {"otlp_endpoint": bad}})


def test_the_sweep_process_sends_no_spans_itself(tmp_path):
    """The spans are built and encoded by the exporter process: the sweep loads no exporter."""
    code = ("import sys; from pathlib import Path; from mas.otel.receiver import OtlpReceiver; "
            "from tests.otel_helpers import scripted_sweep; from mas.otel.sidecar import flush_all\n"
            "with OtlpReceiver() as rx:\n"
            "    import os; os.environ['OTEL_EXPORTER_OTLP_ENDPOINT'] = rx.base_url\n"
            f"    scripted_sweep(Path({str(tmp_path)!r}), systems=['sas'], tasks=2)\n"
            "    n = len(rx.spans)\n"
            "print(n, sorted(m for m in sys.modules if m.startswith(('opentelemetry.exporter', 'mas.otel.export'))))")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    n, modules = out.stdout.strip().splitlines()[-1].split(" ", 1)
    assert int(n) > 0  # the sweep flushed the exporter process before returning
    # (langsmith imports the OpenTelemetry SDK itself; the exporter and our span building stay out)
    assert modules == "[]", modules


def test_exporter_process_lacks_the_model_keys_and_never_blocks_a_run(tmp_path, monkeypatch):
    from descriptor.redact import register_secret_env
    from mas.otel.sidecar import QUEUE_RUNS, Sidecar

    monkeypatch.setenv("MY_ROUTE_SESAME", "open-sesame-1234567")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=blue")
    register_secret_env(["MY_ROUTE_SESAME"])
    car = Sidecar("http://127.0.0.1:9/v1/traces")
    try:
        environ = Path(f"/proc/{car.proc.pid}/environ").read_bytes().split(b"\0")
        assert b"OTEL_EXPORTER_OTLP_HEADERS=x-team=blue" in environ
        assert not any(e.startswith(b"MY_ROUTE_SESAME=") for e in environ)
        car.proc.kill()
        car.proc.wait()
        # a dead exporter: runs go on, their spans are dropped and counted, a flush says it failed
        for _ in range(QUEUE_RUNS + 5):
            car.send(b'{"meta": {}}\n')
        assert not car.flush(2.0)
        assert car.dropped >= 5
    finally:
        car.close(timeout_s=5)


@pytest.mark.serial  # a time limit of 8 s
def test_a_sweep_killed_with_9_leaves_its_exporter_process_a_few_seconds_at_most(tmp_path):
    """At the end of its input the exporter process sent what was queued with the exporter's own timeout (10 s)
    and retries: against an endpoint that accepts and never answers it outlived a SIGKILLed sweep by 11-18 s."""
    import os
    import signal
    import socket
    import threading
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(silent.accept()[0]) for _ in iter(int, 1)], daemon=True).start()
    port = silent.getsockname()[1]
    sweep = subprocess.Popen(
        [sys.executable, "main.py", "run", "--benchmark", "arith", "--task-limit", "40", "--systems", "sas",
         "--model", "scripted", "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none",
         "--set", "models.default.scripted_latency_ms=100", "--set", f'tracing.otlp_endpoint="http://127.0.0.1:{port}"'],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        child = None
        while time.monotonic() < deadline and (child is None or len(list(tmp_path.rglob("*.result.json"))) < 3):
            for proc in Path("/proc").iterdir():
                if proc.name.isdigit():
                    try:
                        stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                        if int(stat[1]) == sweep.pid and b"mas.otel.sidecar" in (proc / "cmdline").read_bytes():
                            child = int(proc.name)
                    except (OSError, IndexError, ValueError):
                        pass
            time.sleep(0.1)
        assert child is not None, "no exporter process started"
        sweep.send_signal(signal.SIGKILL)
        sweep.wait(timeout=10)
        killed = time.monotonic()
        while Path(f"/proc/{child}").exists() and time.monotonic() - killed < 30:
            state = (Path(f"/proc/{child}") / "stat").read_text().rsplit(")", 1)[1].split()[0] \
                if Path(f"/proc/{child}").exists() else "X"
            if state == "Z":  # exited; init reaps it
                break
            time.sleep(0.1)
        assert time.monotonic() - killed < 8, "the exporter process outlived the killed sweep"
    finally:
        sweep.kill()
        sweep.wait()
        for c in held:
            c.close()
        silent.close()
        with __import__("contextlib").suppress(ProcessLookupError, TypeError):
            os.kill(child, signal.SIGKILL)  # type: ignore[arg-type]
