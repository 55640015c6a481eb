"""``benchmark-check``: a benchmark's reference solutions and an empty answer through its own evaluation.

A user trusts an evaluator when the reference solution of every task passes
and doing nothing fails (except where doing nothing is the solution).  Each
task gets a fresh environment for each of the two, exactly as a run would.

>>> from benchmark.registry import get_benchmark
>>> check_benchmark(get_benchmark("arith"), limit=5).summary()
{'n': 5, 'oracle_solved': 5, 'empty_solved': 0}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmark.base import Benchmark, Evaluation, Task


@dataclass(slots=True)
class CheckReport:
    n: int = 0
    oracle_solved: int = 0
    empty_solved: int = 0
    oracle_failures: list[str] = field(default_factory=list)
    """Task ids whose reference solution did not pass."""
    empty_passes_with_reference_actions: list[str] = field(default_factory=list)
    """Task ids solved by doing nothing although the reference does act (its actions change nothing)."""
    problems: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    """Benchmarks whose tasks are sub-steps of problems (``metadata["problem"]``, SciCode): problem -> (every
    sub-step solved by the oracle, by the empty answer); empty for the others."""

    def summary(self) -> dict[str, int]:
        out = {"n": self.n, "oracle_solved": self.oracle_solved, "empty_solved": self.empty_solved}
        if self.problems:
            out |= {"problems": len(self.problems),
                    "oracle_problems_solved": sum(o for o, _ in self.problems.values()),
                    "empty_problems_solved": sum(e for _, e in self.problems.values())}
        return out


def run_oracle(bench: Benchmark, task: Task) -> Evaluation:
    """The reference solution judged as a run would be: reference actions in a fresh environment, then the answer."""
    env = bench.make_environment(task)
    if env is not None:
        for action in bench.reference_actions(task):
            env.call(action.name, action.args)
    return bench.evaluate(task, bench.reference_answer(task), env)


def run_empty(bench: Benchmark, task: Task) -> Evaluation:
    """An empty answer and no action, in a fresh environment."""
    return bench.evaluate(task, "", bench.make_environment(task))


def check_benchmark(bench: Benchmark, limit: int | None = None, seed: int = 0) -> CheckReport:
    report = CheckReport()
    for task in bench.load_tasks(limit, seed=seed):
        report.n += 1
        oracle, empty = run_oracle(bench, task).success, run_empty(bench, task).success
        if oracle:
            report.oracle_solved += 1
        else:
            report.oracle_failures.append(task.task_id)
        if empty:
            report.empty_solved += 1
            if bench.reference_actions(task):
                report.empty_passes_with_reference_actions.append(task.task_id)
        if "problem" in task.metadata:  # a problem is solved when all its sub-steps are
            before = report.problems.get(str(task.metadata["problem"]), (True, True))
            report.problems[str(task.metadata["problem"])] = (before[0] and oracle, before[1] and empty)
    return report
