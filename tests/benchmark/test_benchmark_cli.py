"""The benchmark commands: list-benchmarks, benchmark-info (with --config), benchmark-check; and the base contract."""

from __future__ import annotations

import json

import pytest

import main
from benchmark.check import check_benchmark
from benchmark.registry import get_benchmark


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_benchmarks_names_workbench(capsys) -> None:
    code, out, _ = run_cli(capsys, "list-benchmarks")
    assert code == 0 and "workbench" in out.split()
    code, out, _ = run_cli(capsys, "list-benchmarks", "--long")
    line = next(x for x in out.splitlines() if x.startswith("workbench\t"))
    assert "actions" in line and "MIT" in line


def test_benchmark_info_describes_workbench_with_config_options(capsys, tmp_path) -> None:
    config = tmp_path / "exp.toml"
    config.write_text('[mas]\nmax_rounds = 2\n\n[benchmarks.workbench]\ntools = "domain"\n')
    code, out, _ = run_cli(capsys, "benchmark-info", "--benchmark", "workbench", "--config", str(config))
    assert code == 0
    info = json.loads(out)
    assert info["tasks"] == 690 and info["tasks_without_action"] == 122
    assert info["tasks_per_domain"]["multi_domain"] == 210 and info["tasks_per_domain"]["email"] == 90
    assert info["options_given"] == {"tools": "domain"} and info["options"]["tools"] == "domain"
    assert "find_email_address" in info["tools_by_domain"]["company_directory"]
    assert "MIT" in info["license"] and "fresh copy" in info["evaluation"]
    code, out, _ = run_cli(capsys, "benchmark-info", "--benchmark", "workbench", "--config", str(config),
                           "--set", "benchmarks.workbench.tools=all")
    assert json.loads(out)["options_given"] == {"tools": "all"}


def test_benchmark_info_reads_the_example_config(capsys) -> None:
    code, out, _ = run_cli(capsys, "benchmark-info", "--benchmark", "arith", "--config",
                           "config/experiment.example.toml")
    assert code == 0 and json.loads(out)["options_given"] == {"count": 50}


@pytest.mark.parametrize(("argv", "message"), [
    (["benchmark-info", "--benchmark", "nope"], "unknown benchmark 'nope'; known: arith"),
    (["benchmark-check", "--benchmark", "nope"], "unknown benchmark 'nope'"),
    (["benchmark-check", "--benchmark", "workbench", "--set", "benchmarks.workbench.tools=some"],
     'benchmarks.workbench.tools: expected "domain" or "all"'),
    (["benchmark-info", "--benchmark", "workbench", "--set", "benchmarks.workbench.colour=red"],
     "benchmarks.workbench: unknown option(s) colour; accepted: tools"),
    (["benchmark-info", "--benchmark", "arith", "--set", "mas.max_rounds=2"], "expected benchmarks.arith.OPTION=VALUE"),
    (["benchmark-info", "--benchmark", "arith", "--config", "/nonexistent/exp.toml"], "config file not found"),
    (["benchmark-check", "--benchmark", "arith", "--task-limit", "0"], "--task-limit: expected a positive number"),
])
def test_bad_input_exits_2_with_one_clear_line(capsys, argv, message) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_bad_config_section_exits_2(capsys, tmp_path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[benchmarks]\nworkbench = "all"\n')
    code, _, err = run_cli(capsys, "benchmark-info", "--benchmark", "workbench", "--config", str(config))
    assert code == 2 and "[benchmarks.workbench] must be a table" in err
    config.write_text("[benchmarks.workbench\n")
    code, _, err = run_cli(capsys, "benchmark-info", "--benchmark", "workbench", "--config", str(config))
    assert code == 2 and "malformed TOML" in err


@pytest.mark.parametrize(("name", "limit", "expected"), [
    ("arith", 4, {"n": 4, "oracle_solved": 4, "empty_solved": 0}),
    ("gsm8k", 5, {"n": 5, "oracle_solved": 5, "empty_solved": 0}),
    ("humaneval", 2, {"n": 2, "oracle_solved": 2, "empty_solved": 0}),
    ("mbpp", 2, {"n": 2, "oracle_solved": 2, "empty_solved": 0}),
])
def test_benchmark_check_json(capsys, name, limit, expected) -> None:
    code, out, _ = run_cli(capsys, "benchmark-check", "--benchmark", name, "--task-limit", str(limit), "--json")
    assert code == 0 and json.loads(out) == expected


def test_benchmark_check_workbench_counts_no_action_tasks(capsys) -> None:
    bench = get_benchmark("workbench")
    tasks = bench.load_tasks(40)
    no_action = sum(not t.reference["answer"] for t in tasks)
    code, out, _ = run_cli(capsys, "benchmark-check", "--benchmark", "workbench", "--task-limit", "40")
    assert code == 0
    assert out.strip() == f"workbench: oracle solved 40/40, empty solved {no_action}/40"
    assert 0 < no_action < 40


def test_check_catches_a_broken_evaluator() -> None:
    class Broken(type(get_benchmark("arith"))):
        def reference_answer(self, task):
            return str(task.reference + 1)

    report = check_benchmark(Broken(), limit=3)
    assert report.summary() == {"n": 3, "oracle_solved": 0, "empty_solved": 0}
    assert report.oracle_failures == ["arith_0_0000", "arith_0_0001", "arith_0_0002"]


@pytest.mark.parametrize("name", ["arith", "gsm8k", "humaneval", "mbpp"])
def test_answer_benchmarks_have_no_environment(name: str) -> None:
    bench = get_benchmark(name)
    task = bench.load_tasks(1)[0]
    assert bench.make_environment(task) is None and bench.reference_actions(task) == []
    assert bench.evaluate(task, bench.reference_answer(task), None).success
