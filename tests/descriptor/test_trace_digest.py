"""A run's trace digest (``trace_metrics.json``'s ``digest``): summaries read it instead of the trace, and only
while the trace is the one it was computed from."""

from __future__ import annotations

import json
import shutil

import pytest

import descriptor.run_files as run_files
from descriptor.summaries import summarize_experiment
from main import main

DERIVED = ("descriptor.json", "analysis.json", "task_summary.json")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("digest")
    assert main(["run", "--benchmark", "arith", "--systems", "sas,debate", "--model", "scripted", "--task-limit", "2",
                 "--runs-per-task", "2", "--inject-errors", "0.5", "--output-root", str(out), "--experiment-id", "e",
                 "--progress", "none"]) == 0
    return out / "e"


def _cold_copy(sweep, dest):
    shutil.copytree(sweep, dest)
    (dest / ".summary_cache.json").unlink()  # summarised from scratch
    return dest


def _derived(root):
    return {str(p.relative_to(root)): p.read_bytes() for name in DERIVED for p in sorted(root.rglob(name))}


def test_a_summary_parses_no_trace_its_digest_vouches_for_and_says_the_same(sweep, tmp_path, monkeypatch):
    """Issue 33: every summary parsed every trace again; the numbers must not change by skipping that."""
    parsed = []
    real = run_files.read_trace_prefix
    monkeypatch.setattr(run_files, "read_trace_prefix", lambda path: parsed.append(path) or real(path))
    root = _cold_copy(sweep, tmp_path / "digested")
    summarize_experiment(root, plots=False)
    assert parsed == []
    # The same experiment without digests (as runs written before them): every trace parsed, the same files.
    plain = _cold_copy(sweep, tmp_path / "plain")
    for p in plain.rglob("run_*.trace_metrics.json"):
        record = json.loads(p.read_text())
        del record["digest"]
        p.write_text(json.dumps(record))
    summarize_experiment(plain, plots=False)
    assert len(parsed) == 8
    assert _derived(root) == _derived(plain)


def test_a_trace_changed_after_its_run_is_parsed_under_the_damage_rule(sweep, tmp_path):
    root = _cold_copy(sweep, tmp_path / "damaged")
    trace = sorted(root.rglob("run_1.trace.jsonl"))[0]
    lines = trace.read_text().splitlines(keepends=True)
    lines[1] = "{not json\n"  # damage in the middle: the run is skipped
    trace.write_text("".join(lines))
    summary = summarize_experiment(root, plots=False)
    assert [(i.kind, i.line, i.included) for i in summary.issues] == [("damaged_trace", 2, False)]
    assert summary.n_runs == 7
