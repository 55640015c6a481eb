"""End to end: `main.py run` with the scripted model writes every artifact; bad input writes nothing."""

import json
from pathlib import Path

import pytest

from descriptor.events import read_trace
from main import main
from mas.topologies.pictures import PICTURE_FILES

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "config" / "experiment.example.toml")
ARTIFACTS = ("trace.jsonl", "answer.txt", "metadata.json", "eval.json", "trace_metrics.json", "result.json",
             "trajectory.json", "trajectory.md")  # checkpoints: kept for failed runs only (tests/attribution/test_rollback.py)


def run_cli(tmp_path, *extra):
    return main(["run", "--config", CONFIG, "--benchmark", "arith", "--task-limit", "3", "--runs-per-task", "2",
                 "--systems", "sas", "--model", "scripted", "--output-root", str(tmp_path), "--experiment-id", "t1",
                 *extra])


def test_scripted_run_writes_every_artifact(tmp_path, capsys):
    assert run_cli(tmp_path) == 0
    out = capsys.readouterr().out
    assert "wrote 6 runs" in out and "success" in out
    task_dirs = sorted((tmp_path / "t1" / "arith" / "sas").iterdir())
    task_dirs = [d for d in task_dirs if d.is_dir()]
    assert len(task_dirs) == 3
    for name in PICTURE_FILES:  # the system's graph pictures, once per <benchmark>/<system>/
        assert (tmp_path / "t1" / "arith" / "sas" / name).stat().st_size > 0, name
    for d in task_dirs:
        for r in (0, 1):
            for suffix in ARTIFACTS:
                assert (d / f"run_{r}.{suffix}").is_file(), f"missing {d.name}/run_{r}.{suffix}"
            events = read_trace(d / f"run_{r}.trace.jsonl")  # every line validates
            metrics = json.loads((d / f"run_{r}.trace_metrics.json").read_text())
            assert metrics["tokens_total"] == sum(e.token_in + e.token_out for e in events)
            assert metrics["latency_total"] == pytest.approx(sum(e.latency_ms for e in events), abs=1e-9)
            assert metrics["tool_calls_total"] == sum(e.event_type == "tool_call" for e in events)
            result = json.loads((d / f"run_{r}.result.json").read_text())
            assert result["success"] is True and result["completion"] is True
            meta = json.loads((d / f"run_{r}.metadata.json").read_text())
            assert meta["thread_id"] and meta["versions"]["langgraph"] and meta["seed"] == r
            assert meta["injected_error"] is None


def test_machine_files_are_compact_and_trajectory_events_are_a_table_of_every_event(tmp_path):
    """The manifest is one line of JSON, and the trajectory's events are a table, its column names once (issue 33:
    bytes per run) and a row per trace event; the Markdown transcript has every step too."""
    assert run_cli(tmp_path) == 0
    assert len((tmp_path / "t1" / "manifest.json").read_text().splitlines()) == 1
    d = next(p for p in (tmp_path / "t1" / "arith" / "sas").iterdir() if p.is_dir())
    table = json.loads((d / "run_0.trajectory.json").read_text())["events"]
    assert {"seq", "step_index", "actor", "event_type", "tokens", "latency_ms", "summary"} <= set(table["columns"])
    events = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    trace = read_trace(d / "run_0.trace.jsonl")
    assert [(e["seq"], e["actor"], e["event_type"]) for e in events] == [(e.seq, e.actor, e.event_type) for e in trace]
    steps = [e for e in events if e["step_index"] is not None]
    assert steps and len(steps) == (d / "run_0.trajectory.md").read_text().count("[step ")


def test_rerun_skips_finished_runs(tmp_path, capsys):
    assert run_cli(tmp_path) == 0
    f = next((tmp_path / "t1" / "arith" / "sas").glob("*/run_0.result.json"))
    before = f.stat().st_mtime_ns
    assert run_cli(tmp_path) == 0
    assert f.stat().st_mtime_ns == before


def test_injected_errors_are_recorded(tmp_path):
    assert run_cli(tmp_path, "--inject-errors", "1.0") == 0
    metas = [json.loads(p.read_text()) for p in (tmp_path / "t1").rglob("run_*.metadata.json")]
    assert metas and all(m["injected_error"] is not None for m in metas)
    results = [json.loads(p.read_text()) for p in (tmp_path / "t1").rglob("run_*.result.json")]
    assert not any(r["success"] for r in results)  # one wrong step propagates to a wrong answer


@pytest.mark.parametrize(("args", "message"), [
    (["--benchmark", "nope"], "nope"),
    (["--task-limit", "0"], "--task-limit"),
    (["--model", "nosuchroute"], "unknown model route"),
])
def test_bad_input_fails_cleanly(tmp_path, capsys, args, message):
    base = ["run", "--config", CONFIG, "--benchmark", "arith", "--systems", "sas", "--model", "scripted",
            "--output-root", str(tmp_path), "--experiment-id", "bad"]
    assert main(base + args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_malformed_toml_fails_cleanly(tmp_path, capsys):
    cfg = tmp_path / "broken.toml"
    cfg.write_text("[models.default\nprovider = 'scripted'\n")
    assert main(["run", "--config", str(cfg), "--benchmark", "arith", "--output-root", str(tmp_path),
                 "--experiment-id", "bad"]) == 2
    assert "broken.toml: malformed TOML" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_missing_api_key_fails_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    assert main(["run", "--config", CONFIG, "--benchmark", "arith", "--model", "openrouter",
                 "--output-root", str(tmp_path), "--experiment-id", "bad"]) == 2
    assert "OPENROUTER_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_benchmark_takes_a_comma_list_like_systems(tmp_path, capsys):
    """``--benchmark arith,gsm8k`` is one experiment over both benchmarks, as ``--systems sas,debate`` is over both
    systems; the repeated flag still adds more, and a name given twice runs once."""
    assert main(["run", "--config", CONFIG, "--benchmark", "arith,gsm8k", "--benchmark", "arith", "--systems",
                 "sas,debate", "--model", "scripted", "--task-limit", "1", "--output-root", str(tmp_path),
                 "--experiment-id", "both", "--progress", "none"]) == 0
    assert "wrote 4 runs" in capsys.readouterr().out
    results = [json.loads(p.read_text()) for p in (tmp_path / "both").rglob("run_*.result.json")]
    assert sorted((r["benchmark"], r["system"]) for r in results) == [
        ("arith", "debate"), ("arith", "sas"), ("gsm8k", "debate"), ("gsm8k", "sas")]
    manifest = json.loads((tmp_path / "both" / "manifest.json").read_text())
    assert manifest["invocations"][-1]["request"]["benchmarks"] == ["arith", "gsm8k"]
