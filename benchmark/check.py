"""``benchmark-check``: a benchmark's reference solutions and an empty answer through its own evaluation.

A user trusts an evaluator when the reference solution of every task passes
and doing nothing fails (except where doing nothing is the solution).  Each
task gets a fresh environment for each of the two, exactly as a run would.

>>> from benchmark.registry import get_benchmark
>>> check_benchmark(get_benchmark("arith"), limit=5).summary()
{'n': 5, 'oracle_solved': 5, 'empty_solved': 0}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from benchmark.base import Benchmark, Evaluation, Task
from descriptor.errors import UserError
from descriptor.problems import UNTARGETED_KEY
from descriptor.problems import problem_success as solved_problems


@dataclass(slots=True)
class CheckReport:
    n: int = 0
    oracle_solved: int = 0
    empty_solved: int = 0
    oracle_failures: list[str] = field(default_factory=list)
    """Task ids whose reference solution did not pass."""
    empty_passes_with_reference_actions: list[str] = field(default_factory=list)
    """Task ids solved by doing nothing although the reference does act (its actions change nothing)."""
    oracle_problems: dict[str, bool] = field(default_factory=dict)
    """Benchmarks whose tasks are sub-steps of problems (``metadata["problem"]``, SciCode): problem -> every
    sub-step solved by the oracle (:func:`problem_success`); empty for the others."""
    empty_problems: dict[str, bool] = field(default_factory=dict)
    untargeted: list[str] = field(default_factory=list)
    """Task ids none of whose tests compares an expected value (``metadata["tests_compare_no_target"]``): a pass
    there checks properties, not the reference's values."""

    def summary(self) -> dict[str, int]:
        """Counts: tasks, oracle and empty passes; problems and their passes, and tasks whose tests compare no
        target, where there are any."""
        out = {"n": self.n, "oracle_solved": self.oracle_solved, "empty_solved": self.empty_solved}
        if self.oracle_problems:
            out |= {"problems": len(self.oracle_problems), "oracle_problems_solved": sum(self.oracle_problems.values()),
                    "empty_problems_solved": sum(self.empty_problems.values())}
        if self.untargeted:
            out["tests_compare_no_target"] = len(self.untargeted)
        return out


def problem_success(outcomes: Iterable[tuple[Task, bool]]) -> dict[str, bool]:
    """Main-problem success from sub-step outcomes: a problem (``metadata["problem"]``) is solved when every one
    of its sub-steps is (:func:`descriptor.problems.problem_success`, the summaries' rule); tasks without a
    problem are left out.

    >>> t = lambda i, p: Task(task_id=i, question="", reference=None, metadata={"problem": p})
    >>> problem_success([(t("a", "1"), True), (t("b", "1"), False), (t("c", "2"), True)])
    {'1': False, '2': True}
    """
    return solved_problems((str(task.metadata["problem"]), ok) for task, ok in outcomes if "problem" in task.metadata)


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
    oracles: list[tuple[Task, bool]] = []
    empties: list[tuple[Task, bool]] = []
    for task in bench.load_tasks(limit, seed=seed):
        report.n += 1
        try:
            oracle, empty = run_oracle(bench, task).success, run_empty(bench, task).success
        except UserError:
            raise
        except Exception as err:  # a benchmark's own bug (a plugin's evaluate), named, not a traceback
            raise UserError(f"benchmark {bench.name!r}: judging task {task.task_id!r} raised "
                            f"{type(err).__name__}: {err}") from err
        if oracle:
            report.oracle_solved += 1
        else:
            report.oracle_failures.append(task.task_id)
        if empty:
            report.empty_solved += 1
            if bench.reference_actions(task):
                report.empty_passes_with_reference_actions.append(task.task_id)
        oracles.append((task, oracle))
        empties.append((task, empty))
        if task.metadata.get(UNTARGETED_KEY) is True:
            report.untargeted.append(task.task_id)
    report.oracle_problems, report.empty_problems = problem_success(oracles), problem_success(empties)
    return report
