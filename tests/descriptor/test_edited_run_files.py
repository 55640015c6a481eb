"""Run files edited after their run ended: a summary reads the same figures with or without its cache, never a
hand-edited ``trace_metrics.json``'s, and says when a trace changed since its run ended (issue 33's digests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from descriptor.summaries import summarize_experiment
from main import main


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("edited")
    assert main(["run", "--benchmark", "arith", "--task-limit", "3", "--systems", "sas,debate", "--model", "scripted",
                 "--output-root", str(out), "--experiment-id", "e", "--progress", "none"]) == 0
    return out / "e"


def copy(sweep: Path, tmp_path: Path) -> Path:
    import shutil

    dest = tmp_path / "e"
    shutil.copytree(sweep, dest)
    for cache in dest.glob(".summary_cache*"):
        cache.unlink()
    return dest


def tokens(summary, system: str = "sas") -> float:
    return next(r["tokens_total"] for r in summary.rollups if r["system"] == system)


def first_run(root: Path, system: str = "sas") -> Path:
    return sorted((root / "arith" / system).rglob("run_0.result.json"))[0].parent


def test_a_trace_metrics_record_edited_by_hand_is_not_taken_cache_or_not(sweep, tmp_path):
    root = copy(sweep, tmp_path)
    truth = summarize_experiment(root)
    record_path = first_run(root) / "run_0.trace_metrics.json"
    record = json.loads(record_path.read_text())
    record.update(tokens_total=999_999, tool_calls_total=50)  # the trace's hash left as it was
    record_path.write_text(json.dumps(record))
    for cold in (True, False):  # without the cache, then from the cache the first call wrote
        if cold:
            for cache in root.glob(".summary_cache*"):
                cache.unlink()
        summary = summarize_experiment(root)
        assert tokens(summary) == tokens(truth)
        assert [r["tool_calls_total"] for r in summary.rollups] == [r["tool_calls_total"] for r in truth.rollups]
        assert any(i.kind == "edited_record" and record_path.as_posix().endswith(i.path) for i in summary.issues), (
            cold, summary.issues)


def test_a_cached_summary_rereads_a_task_whose_trace_metrics_record_changed(sweep, tmp_path):
    root = copy(sweep, tmp_path)
    truth = summarize_experiment(root)  # writes the cache
    record_path = first_run(root) / "run_0.trace_metrics.json"
    record = json.loads(record_path.read_text())
    record["tokens_total"] += 5
    record_path.write_text(json.dumps(record))
    again = summarize_experiment(root)
    assert tokens(again) == tokens(truth) and any(i.kind == "edited_record" for i in again.issues)


def test_a_trace_edited_after_its_run_ended_is_named_and_skipped_when_its_totals_changed(sweep, tmp_path):
    root = copy(sweep, tmp_path)
    trace = first_run(root) / "run_0.trace.jsonl"
    lines = trace.read_text().splitlines()
    llm = next(i for i, line in enumerate(lines) if json.loads(line)["token_in"] > 0)
    event = json.loads(lines[llm])
    event["token_in"] += 100_000
    lines[llm] = json.dumps(event)
    trace.write_text("\n".join(lines) + "\n")
    summary = summarize_experiment(root)
    [issue] = [i for i in summary.issues if i.kind == "trace_changed"]
    assert trace.as_posix().endswith(issue.path) and not issue.included
    assert "tokens" in issue.message and "result.json" in issue.message
    sas = next(r for r in summary.rollups if r["system"] == "sas")
    assert sas["n_runs"] == 2  # the edited run is not counted; its 100,000 tokens are nowhere in the figures
    assert sas["tokens_total"] < 50_000


def test_a_trace_changed_without_changing_its_totals_is_read_as_it_is_with_a_warning(sweep, tmp_path, capsys):
    root = copy(sweep, tmp_path)
    trace = first_run(root) / "run_0.trace.jsonl"
    trace.write_text(trace.read_text().replace('"actor":"solver"', '"actor":"solver_renamed"', 1))
    summary = summarize_experiment(root)
    [issue] = [i for i in summary.issues if i.kind == "trace_changed"]
    assert issue.included and "still result.json's" in issue.message
    assert next(r for r in summary.rollups if r["system"] == "sas")["n_runs"] == 3
    assert main(["summarize-experiment", "--experiment-root", str(root)]) == 0
    assert "run_0.trace.jsonl: trace_changed: the trace was changed after the run ended" in capsys.readouterr().err


def test_a_record_written_redacted_is_not_taken_for_one_edited_by_hand(tmp_path):
    """Every JSON artifact is written redacted; a check computed before the redaction failed on the file, and a
    run's own record was reported as edited by hand."""
    from descriptor.io import write_json_atomic
    from descriptor.layout import RunPaths
    from descriptor.records import TraceMetricsRecord
    from descriptor.run_files import _digested
    from descriptor.run_metrics import compute_run_metrics
    from descriptor.trace_digest import trace_digest

    paths = RunPaths(tmp_path, 0)
    paths.trace.write_bytes(b"")
    record = TraceMetricsRecord(success=False, completion=True, **compute_run_metrics([]).model_dump(),
                                stages=[{"stage": "debate", "stop_reason": "see http://bob:hunter2@host/v1"}],
                                digest=trace_digest([], b"")).sealed()
    write_json_atomic(paths.trace_metrics, record, indent=None)
    assert "hunter2" not in paths.trace_metrics.read_text()
    found = _digested(paths)
    assert not found.record_edited and found.metrics is not None
