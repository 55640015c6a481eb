"""The sweep's progress line moves as model calls finish, not only as runs do (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

import mas.sweep.experiment
import mas.sweep.loop
from mas.config import ExperimentConfig, MasSettings, ModelRoute
from mas.llm.meter import CallMeter, MeterReading
from mas.sweep.experiment import ExperimentRequest, run_experiment
from mas.sweep.progress import LogProgress, calls_text


def _debate_cfg(tmp_path: Path, latency_ms: float) -> ExperimentConfig:
    return ExperimentConfig(output_root=str(tmp_path), concurrency=1, mas=MasSettings(max_rounds=1), models={
        "default": ModelRoute(provider="scripted", model="scripted", scripted_latency_ms=latency_ms)})


async def test_tokens_and_calls_show_before_the_first_run_finishes(tmp_path, monkeypatch):
    # One debate run (about ten scripted calls, 40 ms each), with a progress line every 20 ms.
    monkeypatch.setattr(mas.sweep.loop, "make_progress", lambda *_a, **_k: LogProgress(interval_s=0.02))
    monkeypatch.setattr(mas.sweep.experiment, "write_system_pictures", lambda *_a: None)  # matplotlib: seconds
    req = ExperimentRequest(cfg=_debate_cfg(tmp_path, 40.0), benchmarks=["arith"], systems=["debate"],
                            task_limit=1, runs_per_task=1, experiment_id="live", progress="log")
    with capture_logs() as logs:
        results = await run_experiment(req)
    lines = [e for e in logs if e["event"] in ("sweep progress", "sweep done")]
    before = [e for e in lines if e["done"] == 0]
    assert any(e["tokens"] > 0 and e["calls"] > 0 for e in before), before
    assert any(e["calls_in_flight"] >= 1 and e["oldest_call_s"] is not None for e in before)
    # Counted once: the last line is the runs' own total, whatever was shown while they ran.
    assert lines[-1]["event"] == "sweep done"
    assert lines[-1]["tokens"] == sum(r.tokens_total for r in results) > 0
    assert lines[-1]["calls_in_flight"] == 0


def test_a_closed_run_leaves_the_live_count_and_other_runs_stay():
    meter = CallMeter()
    a, b = meter.call_started(), meter.call_started()
    assert meter.reading().in_flight == 2 and meter.reading().oldest_s is not None
    meter.call_finished(a, "run-a", 100)
    meter.call_finished(b, "run-b", 7)
    assert meter.reading().open_tokens == 107 and meter.reading(runs={"run-b"}).open_tokens == 7
    meter.close_run("run-a")
    r = meter.reading()
    assert (r.calls_done, r.in_flight, r.oldest_s, r.open_tokens) == (2, 0, None, 7)


@pytest.mark.parametrize(("reading", "text"), [
    (MeterReading(calls_done=0, in_flight=0, oldest_s=None, open_tokens=0), "calls 0"),
    (MeterReading(calls_done=5, in_flight=4, oldest_s=95.4, open_tokens=0), "calls 5, 4 at the model (oldest 95 s)"),
])
def test_the_bar_says_how_many_calls_wait_at_the_model_and_for_how_long(reading, text):
    assert calls_text(reading.calls_done, reading) == text
