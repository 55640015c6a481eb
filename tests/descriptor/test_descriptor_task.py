"""Task-level descriptor: Q/C/D/R/P, paper-facing fields and the blank rules."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from descriptor.run_files import RunRecord
from descriptor.run_metrics import compute_run_metrics
from descriptor.events import parse_event
from descriptor.task_descriptor import (
    DESCRIPTOR_FIELDS,
    PipelineError,
    check_consistency,
    compute_task_descriptor,
    p95,
    pass_at_k,
)
from descriptor.layout import RunPaths
from descriptor.records import EvalRecord, RunResult
from descriptor.trace_digest import trace_digest
from tests.descriptor_fixtures import ev


def record(r: int, *, success: bool, tokens: int = 100, ms: float = 10.0, calls: int = 0, fails: int = 0,
           completion: bool = True, score: float | None = None) -> RunRecord:
    dicts = [ev("a", "act", tin=tokens, ms=ms, usd=tokens * 1e-6, content=f"r{r}")]
    for i in range(calls):
        dicts.append(ev("a", "tool_call", tool="calc", arguments={"i": i}))
        dicts.append(ev("tool:calc", "tool_result", ok=i >= fails))
    events = tuple(parse_event(d) for d in dicts)
    result = RunResult(run_id=f"run{r}", benchmark="arith", system="sas", task_id="t0", run_index=r, seed=r,
                       success=success, completion=completion, score=float(success), answer="", tokens_total=tokens,
                       latency_total_ms=ms, cost_total_usd=tokens * 1e-6, wall_time_s=0.1)
    evaluation = EvalRecord(success=success, completion=completion, score=float(success) if score is None else score)
    return RunRecord(paths=RunPaths(Path("t0"), r), result=result, eval=evaluation, events=events,
                     metrics=compute_run_metrics(events), digest=trace_digest(events))


def describe(runs):
    return compute_task_descriptor(runs, benchmark="arith", system="sas", task_id="t0")


def test_pass_at_k_unbiased_estimator():
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(8, 2, 3) == pytest.approx(1 - math.comb(6, 3) / math.comb(8, 3))
    assert pass_at_k(4, 3, 3) == 1.0  # C(1, 3) = 0
    assert pass_at_k(2, 1, 3) is None


def test_p95_is_type7():
    assert p95([5.0]) == 5.0
    assert p95([1.0, 2.0, 3.0, 4.0]) == pytest.approx(3.85)  # h = 0.95 * 3 = 2.85


def test_single_run_blanks():
    d = describe([record(0, success=True)])
    assert d["n_runs"] == 1
    assert d["pass_at_1"] == 1.0
    assert d["pass_at_3"] is None and d["pass_at_5"] is None and d["pass_at_8"] is None
    assert d["stability"] is None and d["tokens_cv"] is None
    assert d["R1_success_var"] == d["R2_latency_var"] == d["R3_tokens_var"] == 0.0
    assert d["C1_latency_p95"] == 10.0
    assert d["D1_tool_error_rate"] is None and d["tool_error_rate"] is None  # no tool calls


def test_all_failures():
    d = describe([record(r, success=False, score=0.25) for r in range(4)])
    assert d["Q1_success_rate"] == 0.0 and d["success_rate"] == 0.0
    assert d["cost_per_success"] is None
    assert d["pass_at_1"] == d["pass_at_3"] == 0.0
    assert d["stability"] == 1.0
    assert d["eval_avg_score"] == 0.25


def test_all_successes():
    d = describe([record(r, success=True, tokens=100 + 10 * r) for r in range(8)])
    assert d["Q1_success_rate"] == 1.0
    assert all(d[f"pass_at_{k}"] == 1.0 for k in (1, 3, 5, 8))
    assert d["stability"] == 1.0
    assert d["cost_per_success"] == pytest.approx(d["tokens_total"])


def test_mixed_runs_values():
    runs = [record(0, success=True, tokens=100, ms=10, calls=2, fails=1), record(1, success=False, tokens=300, ms=30),
            record(2, success=True, tokens=200, ms=20, calls=2, fails=0, completion=False),
            record(3, success=False, tokens=400, ms=40)]
    d = describe(runs)
    assert d["Q1_success_rate"] == 0.5
    assert d["Q2_completion_rate"] == 0.75
    assert d["C2_tokens_total"] == 250.0 and d["tokens_total"] == 250.0
    assert d["C4_tool_calls_total"] == 1.0
    assert d["D1_tool_error_rate"] == 0.25  # 1 fail over 4 calls, pooled
    assert d["R1_success_var"] == 0.25  # population variance
    assert d["R3_tokens_var"] == pytest.approx(12500.0)
    assert d["stability"] == 0.0
    assert d["tokens_cv"] == pytest.approx(math.sqrt(12500.0) / 250.0)
    assert d["cost_per_success"] == 500.0
    assert d["C1_latency_p95"] == pytest.approx(38.5)
    assert d["pass_at_3"] == pytest.approx(1 - math.comb(2, 3) / math.comb(4, 3))
    assert d["pass_at_5"] is None
    assert d["P1_steps_total"] == 3.0  # (5 + 1 + 5 + 1) / 4
    assert list(d) == list(DESCRIPTOR_FIELDS)


def test_empty_runs_raise():
    with pytest.raises(ValueError, match="no finished runs"):
        describe([])


def test_consistency_check_names_the_task():
    d = describe([record(0, success=True), record(1, success=False)])
    check_consistency(d, "arith/sas/t0")
    d["eval_success_rate"] = 1.0
    with pytest.raises(PipelineError, match=r"arith/sas/t0: Q1_success_rate=0.5 .* eval_success_rate=1.0"):
        check_consistency(d, "arith/sas/t0")
