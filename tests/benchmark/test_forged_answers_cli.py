"""Issue 30 item 1 end to end, through the CLI only: a fake endpoint answers HumanEval and MBPP tasks with the
reference solutions (all pass: no correct answer is rejected) or with forged answers (none passes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.registry import get_benchmark
from tests.fake_endpoint import Reply, answer, prompt_text
from tests.forged_answers import ATTACKS
from tests.mas.test_hostile_endpoint import planted_key, run_cli, write_config

CANONICAL_TASKS = 50
FORGED_TASKS = 6


def _reply(bench_name: str, state: dict[str, str]):
    """Find the task in the prompt (its code prompt, or its first assert) and answer as ``state["answer"]`` says."""
    bench = get_benchmark(bench_name)
    tasks = bench.load_tasks(CANONICAL_TASKS)
    keys = [t.reference["prompt"].strip() if bench_name == "humaneval" else t.reference["tests"][0] for t in tasks]

    def reply(n: int, request: dict) -> Reply:
        text = prompt_text(request)
        i = next(i for i, key in enumerate(keys) if key in text)
        task = tasks[i]
        if state["answer"] == "reference":
            code = bench.reference_answer(task)
        else:  # the attacks in turn, task by task
            attack = ATTACKS[sorted(ATTACKS)[i % len(ATTACKS)]]
            code = attack(task.metadata["entry_point"], bench_name)
        return answer(f"```python\n{code}\n```", n)

    return reply


def _evals(root: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.rglob("run_*.eval.json"))}


@pytest.mark.slow
@pytest.mark.parametrize("bench_name", ["humaneval", "mbpp"])
def test_references_score_one_and_forged_answers_zero_through_the_cli(tmp_path, endpoint, bench_name: str) -> None:
    state = {"answer": "reference"}
    server = endpoint(_reply(bench_name, state))
    cfg = write_config(tmp_path, server.base_url)
    key = planted_key()
    proc = run_cli(tmp_path, cfg, key, benchmark=bench_name, systems="sas", exp="reference",
                   extra=("--task-limit", str(CANONICAL_TASKS)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    evals = _evals(tmp_path / "out" / "reference")
    assert len(evals) == CANONICAL_TASKS
    assert [t for t, e in evals.items() if not e["success"]] == []

    state["answer"] = "forged"
    proc = run_cli(tmp_path, cfg, key, benchmark=bench_name, systems="sas", exp="forged",
                   extra=("--task-limit", str(FORGED_TASKS)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    evals = _evals(tmp_path / "out" / "forged")
    assert len(evals) == FORGED_TASKS
    assert {t: e["score"] for t, e in evals.items()} == {t: 0.0 for t in evals}
