"""Run-level metrics on hand-made traces: every field and its edge cases."""

from __future__ import annotations

import json

import pytest

from descriptor.run_metrics import (
    compute_run_metrics,
    loop_score,
    loop_signature,
    run_metrics_from_file,
)
from descriptor.events import TraceReadError, parse_event
from tests.descriptor_fixtures import ev, write_trace


def events(*dicts):
    return [parse_event({**d, "seq": i}) for i, d in enumerate(dicts)]


def test_zero_steps_gives_zero_rates():
    m = compute_run_metrics([])
    assert m.steps_total == 0
    assert m.backtrack_rate == m.verification_density == m.loop_score == 0.0
    assert m.tokens_total == m.tool_calls_total == m.handoff_count == m.communication_count == 0


def test_sums_and_counts():
    es = events(
        ev("solver", "plan", tin=10, tout=5, ms=100.5, usd=0.001, content="p"),
        ev("solver", "tool_call", tin=3, tout=2, ms=1.0, tool="calc", arguments={"x": 1}),
        ev("tool:calc", "tool_result", ms=0.5, ok=False),
        ev("solver", "tool_call", ms=1.0, tool="calc", arguments={"x": 2}, redo=True),
        ev("tool:calc", "tool_result", ms=0.5, ok=True),
        ev("solver", "verify", content="looks right"),
        ev("solver", "revise", tin=1, tout=1, content="fix"),
        ev("solver", "finalize", usd=0.0005, content="42"),
    )
    m = compute_run_metrics(es)
    assert m.latency_total == pytest.approx(103.5)
    assert m.tokens_total == 22
    assert m.cost_total == pytest.approx(0.0015)
    assert m.tool_calls_total == 2
    assert m.tool_fail_total == 1
    assert m.steps_total == 8
    assert m.backtrack_rate == pytest.approx(2 / 8)  # one revise + one redo
    assert m.verification_density == pytest.approx(1 / 8)
    # solver, tool, solver, tool, solver...: 4 switches
    assert m.handoff_count == 4


def test_no_tool_calls_means_no_failures():
    m = compute_run_metrics(events(ev("a", "act", content="x"), ev("a", "finalize", content="y")))
    assert m.tool_calls_total == m.tool_fail_total == 0


def test_ok_true_or_missing_is_not_a_failure():
    m = compute_run_metrics(events(ev("t", "tool_result", ok=True), ev("t", "tool_result"), ev("t", "act", ok=False)))
    assert m.tool_fail_total == 0  # ok=false on a non tool_result event does not count


def test_revise_with_redo_counts_twice():
    m = compute_run_metrics(events(ev("a", "revise", content="x", redo=True), ev("a", "act", content="y")))
    assert m.backtrack_rate == pytest.approx(2 / 2)


def test_communication_split_by_sender():
    es = events(
        ev("system:controller", "plan", sends=[{"from": "system:controller", "to": "a"}, {"from": "system:controller", "to": "b"}]),
        ev("a", "act", content="x", sends=[{"from": "a", "to": "b"}]),
        ev("b", "act", content="y", sends=[{"from": "b", "to": "a"}, {"from": "b", "to": "system:judge"}]),
        ev("system", "finalize", sends=[{"from": "system", "to": "user"}]),
    )
    m = compute_run_metrics(es)
    assert m.communication_count == 6
    assert m.communication_agent_to_agent_count == 3
    assert m.communication_system_mediated_count == 3


def test_system_only_events():
    es = events(ev("system:runtime", "plan", content="go"), ev("system:controller", "verify", reason="no_progress"),
                ev("system:judge", "finalize", content="42", tin=5))
    m = compute_run_metrics(es)
    assert m.handoff_count == 0
    assert m.loop_score == 0.0  # system events are never loop candidates
    assert m.steps_total == 3
    assert m.verification_density == pytest.approx(1 / 3)
    assert m.tokens_total == 5


def test_handoffs_ignore_system_events_between_agents():
    es = events(ev("a", "act", content="1"), ev("system:controller", "verify"), ev("a", "act", content="2"),
                ev("b", "act", content="3"), ev("system", "plan"), ev("a", "act", content="4"))
    assert compute_run_metrics(es).handoff_count == 2


def test_loop_score_normalisation_and_tool_signature():
    es = events(
        ev("a", "act", content="Answer  is 4"),
        ev("a", "act", content="answer is 4 "),  # repeat after normalisation
        ev("b", "act", content="answer is 4"),  # other actor: not a repeat
        ev("a", "tool_call", tool="calc", arguments={"y": 2, "x": 1}),
        ev("a", "tool_call", tool="Calc", arguments={"x": 1, "y": 2}),  # same call, key order irrelevant
        ev("a", "tool_call", tool="calc", arguments={"x": 1, "y": 3}),
        ev("tool:calc", "tool_result", content="3"),  # not a candidate
        ev("tool:calc", "tool_result", content="3"),
        ev("a", "plan"),  # empty text: not a candidate
    )
    assert loop_score(es) == pytest.approx(2 / 6)
    assert loop_signature(es[-1]) is None
    assert loop_signature(es[6]) is None


def test_loop_score_same_text_different_event_type_is_not_a_repeat():
    assert loop_score(events(ev("a", "plan", content="x"), ev("a", "act", content="x"))) == 0.0


def test_from_file_and_damaged_last_line(tmp_path):
    path = tmp_path / "run_0.trace.jsonl"
    write_trace(path, [ev("a", "act", tin=3, content="x"), ev("a", "finalize", tin=4, content="y")])
    assert run_metrics_from_file(path).tokens_total == 7
    with path.open("a") as fh:
        fh.write(json.dumps(ev("a", "act", tin=100))[:25])  # truncated write
    with pytest.raises(TraceReadError, match="run_0.trace.jsonl:3"):
        run_metrics_from_file(path)
    assert run_metrics_from_file(path, strict=False).tokens_total == 7
