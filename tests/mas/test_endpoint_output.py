"""Issue 30, through the CLI: what a model writes is never an infrastructure error, and an endpoint cannot stretch
a call past ``timeout_s`` or inflate costs. The attacks come from a fake OpenAI-compatible endpoint on 127.0.0.1:
lone surrogate escapes (small models split emojis), JSON nested thousands of levels deep, absurd usage figures, and a reply trickled one byte a second.
"""

from __future__ import annotations

import json
import time

import pytest

from benchmark.registry import get_benchmark
from tests.fake_endpoint import Reply, answer, completion, prompt_text
from tests.mas.test_hostile_endpoint import planted_key, results, run_cli, write_config


def summary_rollup(root) -> dict:
    [rollup] = json.loads((root / "experiment_summary.json").read_text())["rollups"]
    return rollup


def trace_events(root, result: dict) -> list[dict]:
    path = root / result["benchmark"] / result["system"] / result["task_id"] / f"run_{result['run_index']}.trace.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_lone_surrogate_in_the_wrong_answers_makes_them_wrong_not_errors(tmp_path, endpoint):
    """Right on 2 of 4 tasks, and a split emoji only when wrong: success 0.5 (it said 1.000 with the two wrong
    runs left out as errors)."""
    tasks = get_benchmark("arith").load_tasks(4, seed=0)
    right = {t.question: str(t.reference) for t in tasks[:2]}

    def reply(n: int, request: dict) -> Reply:
        prompt = prompt_text(request)
        if any(q in prompt for q in right):
            return answer(next(a for q, a in right.items() if q in prompt), n)
        # "\ud83d" arrives as the JSON escape a model writes, in the reply's text and in its answer
        return completion("thinking \ud83d " + json.dumps({"reasoning": "\ud83d", "answer_artifact": "-1 \ud83d",
                                                              "confidence": 0.9}), n)

    server = endpoint(reply)
    proc = run_cli(tmp_path, write_config(tmp_path, server.base_url), planted_key(), benchmark="arith",
                   systems="sas", extra=("--task-limit", "4"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = tmp_path / "out" / "e"
    rs = results(root)
    assert [(r["status"], r["success"]) for r in rs] == [("finished", True)] * 2 + [("finished", False)] * 2
    assert "\ufffd" in rs[3]["answer"]
    rollup = summary_rollup(root)
    assert (rollup["n_errors"], rollup["success_rate"]) == (0, 0.5)


def test_json_nested_past_the_stack_is_a_useless_reply_not_an_error(tmp_path, endpoint):
    """An answer nested 5000 levels deep: the run finishes with no usable answer (parsing it raised a
    RecursionError that made the run an infrastructure error)."""
    deep = "[" * 5000 + "]" * 5000
    server = endpoint(lambda n, request: completion('{"reasoning": ' + deep + ', "answer_artifact": ' + deep + "}", n))
    proc = run_cli(tmp_path, write_config(tmp_path, server.base_url), planted_key(), benchmark="arith",
                   systems="sas")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [r] = results(tmp_path / "out" / "e")
    assert (r["status"], r["success"], r["error"]) == ("finished", False, None)


@pytest.mark.parametrize("prompt_tokens, completion_tokens", [(1e300, 5), (1e12, 5), (-500, 5), (0, 200),
                                                               (-500, -20)])
def test_absurd_usage_is_estimated_and_recorded(tmp_path, endpoint, prompt_tokens, completion_tokens):
    """``prompt_tokens = 1e300`` gave ``cost_total_usd: 2e+294``, and a count past ten million (1e12) was capped at
    10M tokens (10,000 USD a call at these prices); such a count, a negative one (counted as 0, "provider") or an
    empty prompt beside an output is no count of the call: it is estimated locally, as a reply without usage is,
    and the trace holds an ``absurd_usage`` error event."""

    def reply(n: int, request: dict) -> Reply:
        body = json.loads(answer("7", n)[2])
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens}
        return 200, {"content-type": "application/json"}, json.dumps(body).encode()

    server = endpoint(reply)
    cfg = write_config(tmp_path, server.base_url, price_input_per_1m=2.0)
    proc = run_cli(tmp_path, cfg, planted_key(), benchmark="arith", systems="sas")
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = tmp_path / "out" / "e"
    [r] = results(root)
    calls = len([e for e in trace_events(root, r) if e["event_type"] == "error"
                 and e["payload"]["kind"] == "absurd_usage"])
    assert r["status"] == "finished" and calls >= 1
    llm = [e for e in trace_events(root, r) if e.get("usage_source")]
    assert llm and all(e["usage_source"] == "estimate" and 0 < e["token_in"] < 8192 for e in llm)
    assert r["cost_total_usd"] <= len(llm) * 8192 * 2.0 / 1e6 and r["cost_total_usd"] > 0
    assert summary_rollup(root)["cost_total"] == r["cost_total_usd"]


def test_timeout_s_is_a_deadline_for_the_whole_call(tmp_path, endpoint):
    """A reply trickled one byte a second kept a call with ``timeout_s`` alive until its last byte (each read
    was within the timeout); now each attempt ends at ``timeout_s`` and the run is an infrastructure error."""
    body, slow = answer("7")[2], 30

    def reply(n: int, request: dict) -> Reply:
        def trickle():
            for i in range(slow):  # each byte within any per-read timeout, the reply after 30 s
                yield body[i:i + 1]
                time.sleep(1.0)
            yield body[slow:]

        return 200, {"content-type": "application/json", "content-length": str(len(body))}, trickle()

    server = endpoint(reply)
    cfg = write_config(tmp_path, server.base_url, timeout_s=1.5, max_retries=1)
    proc = run_cli(tmp_path, cfg, planted_key(), benchmark="arith", systems="sas")
    assert proc.returncode == 1, proc.stderr[-3000:]
    root = tmp_path / "out" / "e"
    [r] = results(root)
    assert r["status"] == "error" and "LLMCallError" in r["error"], r
    assert len(server.requests) == 2  # retried like any timeout
    attempts = [e for e in trace_events(root, r) if e["event_type"] == "error" and e["payload"]["kind"] == "llm_call"]
    assert [e["payload"]["will_retry"] for e in attempts] == [True, False]
    # each attempt's time, as the trace measured it: 1.5 s and scheduling (30 s when only reads were timed)
    assert max(e["latency_ms"] for e in attempts) < slow * 1000 / 3, attempts


def cut_at_the_limit(content: str, n: int = 0) -> Reply:
    """A 200 completion that stopped at max_tokens (``finish_reason: length``)."""
    code, headers, body = completion(content, n)
    data = json.loads(body)
    data["choices"][0]["finish_reason"] = "length"
    return code, headers, json.dumps(data).encode()


def test_a_reply_looping_until_max_tokens_is_a_visible_failure_not_graded_by_its_last_number(tmp_path, endpoint):
    """A reply that repeats itself until the token limit and happens to end on the right number: no answer
    (``parse: cut_at_max_tokens`` on the step), so the run fails (it was graded by its last number and passed),
    while a cut reply whose answer field was complete keeps that answer."""
    tasks = get_benchmark("arith").load_tasks(2, seed=0)
    looping, complete = str(tasks[0].reference), str(tasks[1].reference)

    def reply(n: int, request: dict) -> Reply:
        if tasks[0].question in prompt_text(request):
            return cut_at_the_limit("Let me add again: " * 40 + looping, n)
        return cut_at_the_limit('{"reasoning": "r", "answer_artifact": "' + complete + '", "confidence": 0.9, "no', n)

    server = endpoint(reply)
    proc = run_cli(tmp_path, write_config(tmp_path, server.base_url), planted_key(), benchmark="arith",
                   systems="sas", extra=("--task-limit", "2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = tmp_path / "out" / "e"
    by_task = {r["task_id"]: r for r in results(root)}
    cut, kept = by_task[tasks[0].task_id], by_task[tasks[1].task_id]
    assert (cut["status"], cut["success"], cut["answer"]) == ("finished", False, "")
    [step] = [e for e in trace_events(root, cut) if "parse" in (e.get("payload") or {})]
    assert (step["payload"]["parse"], step["payload"]["answer_artifact"]) == ("cut_at_max_tokens", "")
    assert (kept["success"], kept["answer"]) == (True, complete)
