"""The sweep's ETA comes from the model calls finished, and is not shown until it can be estimated."""

from __future__ import annotations

import doctest
import io
import time

import pytest
from rich.console import Console

import mas.sweep.eta
import mas.sweep.progress
from descriptor.records import RunResult
from mas.llm.meter import CallMeter, MeterReading
from mas.sweep.eta import eta_s
from mas.sweep.progress import BarProgress, SweepStats, eta_text

SAS, DEBATE = ("arith", "sas"), ("arith", "debate")


def test_the_doctests_hold():
    assert doctest.testmod(mas.sweep.eta).failed == 0
    assert doctest.testmod(mas.sweep.progress).failed == 0


def test_no_eta_before_a_call_or_while_a_system_left_has_no_finished_run():
    assert eta_s(elapsed_s=50.0, left={SAS: 6, DEBATE: 6}, done_runs={}, done_calls={}) is None
    # calls finished, no run yet: how many calls a run makes is not known
    assert eta_s(elapsed_s=50.0, left={SAS: 6, DEBATE: 6}, done_runs={}, done_calls={}, open_calls=14) is None
    # every sas run done, debate's calls per run still unknown: no guess from sas's one call a run
    assert eta_s(elapsed_s=100.0, left={SAS: 0, DEBATE: 6}, done_runs={SAS: 6}, done_calls={SAS: 6},
                 open_calls=14) is None


def test_the_eta_is_the_calls_left_at_the_rate_calls_finished():
    # debate: 5 calls a run (one run finished); its 5 runs left make 25 calls, 20 of which are done
    got = eta_s(elapsed_s=160.0, left={SAS: 0, DEBATE: 5}, done_runs={SAS: 6, DEBATE: 1},
                done_calls={SAS: 6, DEBATE: 5}, open_calls=20)
    assert got == pytest.approx((25 - 20) / ((6 + 5 + 20) / 160.0))
    # the runs-based rule at the same moment: 160 s / 7 runs x 5 runs left
    assert 160.0 / 7 * 5 > 3 * got


def test_a_system_new_on_a_benchmark_borrows_its_calls_per_run_from_another_benchmark():
    got = eta_s(elapsed_s=10.0, left={("gsm8k", "debate"): 2}, done_runs={DEBATE: 2}, done_calls={DEBATE: 8})
    assert got == pytest.approx(2 * 4 / (8 / 10.0))


def test_calls_at_the_model_are_a_floor_and_nothing_left_is_zero():
    # the runs in flight have made more calls than their system's average: the calls at the model still remain
    got = eta_s(elapsed_s=10.0, left={DEBATE: 1}, done_runs={DEBATE: 1}, done_calls={DEBATE: 4}, open_calls=9,
                in_flight=2)
    assert got == pytest.approx(2 / (13 / 10.0))
    assert eta_s(elapsed_s=10.0, left={DEBATE: 0}, done_runs={DEBATE: 3}, done_calls={DEBATE: 9}) == 0.0


def test_without_calls_in_this_process_runs_are_the_unit():
    # dask worker processes make the calls: the meter sees none
    assert eta_s(elapsed_s=40.0, left={SAS: 8}, done_runs={SAS: 2}, done_calls={SAS: 0}) == pytest.approx(160.0)


def result(system: str, run_index: int = 0) -> RunResult:
    return RunResult(run_id=f"{system}-{run_index}", benchmark="arith", system=system, task_id="t",
                     run_index=run_index, seed=0, success=True, completion=True, score=1.0, answer="1",
                     tokens_total=10, latency_total_ms=1.0, cost_total_usd=0.0, wall_time_s=1.0)


def test_sweep_stats_count_calls_per_group_and_leave_resumed_runs_out_of_the_rate():
    groups = {f"{s}-{r}": ("arith", s) for s in ("sas", "debate") for r in range(3)}
    stats = SweepStats(total=6, runs=frozenset(groups), groups=groups, started=time.monotonic() - 30.0)
    idle = MeterReading(calls_done=0, in_flight=0, oldest_s=None, open_tokens=0)
    stats.add(result("sas", 0), skipped=True)  # found finished on resume: no sample of this invocation's rate
    assert stats.eta_s(idle) is None
    stats.add(result("sas", 1), calls=1)
    stats.add(result("debate", 0), calls=6)
    assert stats.left == {SAS: 1, DEBATE: 2} and stats.done_calls == {SAS: 1, DEBATE: 6}
    assert stats.eta_s(idle) == pytest.approx((1 * 1 + 2 * 6) / (7 / 30.0), rel=0.02)


def test_the_meter_counts_each_runs_calls_until_it_closes():
    meter = CallMeter()
    for run in ("a", "a", "b"):
        meter.call_finished(meter.call_started(), run, 5)
    assert meter.reading(runs={"a"}).open_calls == 2 and meter.reading().open_calls == 3
    assert meter.close_run("a") == 2 and meter.close_run("a") == 0
    assert meter.reading().open_calls == 1


def test_the_bar_shows_no_eta_until_there_is_one_and_cuts_nothing_at_80_columns():
    bar = BarProgress()
    stats = SweepStats(total=1200, groups={f"r{i}": SAS for i in range(1200)})
    fields = bar._fields(stats)
    assert fields["eta"] == "-:--:--"
    bar.task = bar.progress.add_task("sweep", total=1200, completed=0, **fields)
    console = Console(file=io.StringIO(), width=80, color_system=None)
    console.print(*bar.progress.get_renderables())
    lines = console.file.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].rstrip().endswith("eta -:--:--") and lines[1].startswith("ok 0  err 0")
    # a long sweep's figures: the second line wraps at words, nothing is cut
    detail = "ok 1000  err 100  tok 123,456,789  $1234.5678  calls 123456, 16 at the model (oldest 1234 s)"
    bar.progress.update(bar.task, completed=1100, eta="12:34:56", detail=detail)
    console = Console(file=io.StringIO(), width=80, color_system=None)
    console.print(*bar.progress.get_renderables())
    text = console.file.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines()) and "…" not in text
    assert "1100/1200" in text and "eta 12:34:56" in text and " ".join(text.split()).endswith(" ".join(detail.split()))
    assert eta_text(3725.2) == "1:02:05"
