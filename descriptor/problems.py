"""Problem-level success: benchmarks whose tasks are sub-steps of a larger problem (SciCode).

A task that is one sub-step of a problem says so in its metadata (``problem``: the problem's id,
``problem_tasks``: how many tasks the problem has), and each run records both (``run_<r>.result.json``). The
rule, as SciCode's own tables count a main problem: **a problem is solved in run r when every one of its
sub-steps passed in run r**. Problem success sits beside sub-step success, never in its place:

- a task descriptor of such a task keeps :data:`PROBLEM_KEY`, :data:`PROBLEM_TASKS_KEY` and each finished
  run's success by run index (:data:`RUN_SUCCESS_KEY`), so a system's summary can join its sub-steps;
- a problem counts for a system only when all its tasks ran there (``complete``), and then over the run indices
  every sub-step finished (an errored or missing run of one sub-step leaves that run index out of the problem);
  a problem with some sub-steps not run is named (``problems_partial``), never counted as solved or failed;
- a system's ``problem_success_rate`` is the mean over its complete problems of each problem's rate (solved
  runs / counted runs), as ``success_rate`` is the mean over tasks; the report pools (problem, run) pairs for a
  Wilson interval, as it pools runs for sub-step success. Blank for benchmarks without problems.

Upstream SciCode runs a problem's sub-steps in one conversation, each on the model's own earlier answers; here
every sub-step is a run of its own on the ground truth of the earlier ones (``benchmark/README.md``), so
"solved in run r" reads "every sub-step right, given correct earlier steps, in the r-th repetition".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

PROBLEM_KEY = "problem"
"""A task descriptor's (and a task's metadata) problem id; absent for tasks that are not sub-steps."""
PROBLEM_TASKS_KEY = "problem_tasks"
"""How many tasks the problem has (its sub-steps the benchmark runs as tasks)."""
RUN_SUCCESS_KEY = "run_success"
"""A sub-step task descriptor's ``{run_index: success}`` over its finished runs (keys are strings in JSON)."""
UNTARGETED_KEY = "tests_compare_no_target"
"""Set (true) in a task's metadata and its runs' eval details when none of the task's tests compares an expected
value (SciCode's 78.1, 78.2: a closed form, monotonicity, no NaN): a pass there does not show the answer reproduces
the reference's values, so ``benchmark-check`` lists such tasks and the report marks their successes."""
TASK_FIELDS: tuple[str, ...] = (PROBLEM_KEY, "problem_success_rate")
"""Columns a system's ``summary.csv`` adds to each task row (blank for tasks without a problem)."""
ROLLUP_FIELDS: tuple[str, ...] = ("n_problems", "problem_success_rate")
"""Columns of the roll-ups (blank for benchmarks without problems)."""


def problem_of(metadata: dict[str, Any]) -> dict[str, Any]:
    """What a run's result records of its task's problem (``problem``, ``problem_tasks``) when the task's
    ``metadata`` names one, else nothing.

    >>> problem_of({"problem": 10, "problem_tasks": 3}), problem_of({})
    ({'problem': '10', 'problem_tasks': 3}, {})
    """
    problem, size = metadata.get(PROBLEM_KEY), metadata.get(PROBLEM_TASKS_KEY)
    if problem is None:
        return {}
    ok = isinstance(size, int) and not isinstance(size, bool) and size >= 1
    return {PROBLEM_KEY: str(problem), PROBLEM_TASKS_KEY: size if ok else None}


def problem_success(outcomes: Iterable[tuple[str, bool]]) -> dict[str, bool]:
    """Main-problem success from one outcome per sub-step: a problem is solved when every sub-step is.

    >>> problem_success([("1", True), ("1", False), ("2", True)])
    {'1': False, '2': True}
    """
    solved: dict[str, bool] = {}
    for problem, ok in outcomes:
        solved[problem] = solved.get(problem, True) and bool(ok)
    return solved


@dataclass(kw_only=True, slots=True)
class ProblemOutcome:
    """One problem under one system: how many of its tasks ran and in how many runs all of them passed."""

    problem: str
    tasks_run: int
    """Its tasks with at least one finished run."""
    tasks: int | None
    """How many tasks it has (None: not recorded; then it is never complete)."""
    runs: int = 0
    """Run indices every one of its tasks finished (0 unless complete)."""
    solved: int = 0
    """Of those, the run indices in which every task passed."""

    @property
    def complete(self) -> bool:
        return self.tasks is not None and self.tasks_run == self.tasks and self.runs > 0

    @property
    def rate(self) -> float | None:
        return self.solved / self.runs if self.complete else None


def _run_success(d: dict[str, Any]) -> dict[int, bool]:
    return {int(r): bool(ok) for r, ok in (d.get(RUN_SUCCESS_KEY) or {}).items()}


def problem_outcomes(descriptors: Sequence[dict[str, Any]]) -> dict[str, ProblemOutcome]:
    """Each problem's outcome over one system's task descriptors (tasks without a problem are left out).

    >>> d = lambda t, p, runs: {"task_id": t, "problem": p, "problem_tasks": 2, "run_success": runs}
    >>> out = problem_outcomes([d("a", "1", {"0": True, "1": True}), d("b", "1", {"0": True, "1": False}),
    ...                         d("c", "2", {"0": True})])
    >>> [(p, o.solved, o.runs, o.complete) for p, o in out.items()]
    [('1', 1, 2, True), ('2', 0, 0, False)]
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for d in descriptors:
        if d.get(PROBLEM_KEY) is not None:
            groups.setdefault(str(d[PROBLEM_KEY]), []).append(d)
    out = {}
    for problem, ds in groups.items():
        sizes = {d.get(PROBLEM_TASKS_KEY) for d in ds}
        size = sizes.pop() if len(sizes) == 1 else None  # tasks disagreeing on the size: never complete
        o = ProblemOutcome(problem=problem, tasks_run=len({d["task_id"] for d in ds}),
                           tasks=size if isinstance(size, int) else None)
        if o.tasks is not None and o.tasks_run == o.tasks:
            runs = [_run_success(d) for d in ds]
            shared = set.intersection(*(set(r) for r in runs))
            o.runs = len(shared)
            o.solved = sum(all(r[i] for r in runs) for i in shared)
        out[problem] = o
    return dict(sorted(out.items(), key=lambda kv: _natural(kv[0])))


def _natural(problem: str) -> tuple[int, int | str]:
    return (0, int(problem)) if problem.isdigit() else (1, problem)


def task_problem_fields(descriptors: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each descriptor with :data:`TASK_FIELDS`: its problem and that problem's success rate under this system
    (blank when the task has no problem or the problem is partly run)."""
    outcomes = problem_outcomes(descriptors)
    rows = []
    for d in descriptors:
        p = d.get(PROBLEM_KEY)
        o = outcomes.get(str(p)) if p is not None else None
        rows.append({**d, PROBLEM_KEY: p, "problem_success_rate": o.rate if o is not None else None})
    return rows


def rollup_problem_fields(descriptors: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A system's :data:`ROLLUP_FIELDS` (blank without problems) and, when it has problems, ``problems``: each
    problem's ``{solved, runs}`` (complete ones) and ``problems_partial`` (those with some tasks not run)."""
    outcomes = problem_outcomes(descriptors)
    if not outcomes:
        return {"n_problems": None, "problem_success_rate": None}
    complete = [o for o in outcomes.values() if o.complete]
    rates = [o.rate for o in complete if o.rate is not None]
    return {"n_problems": len(complete), "problem_success_rate": sum(rates) / len(rates) if rates else None,
            "problems": {o.problem: {"solved": o.solved, "runs": o.runs} for o in complete},
            "problems_partial": [o.problem for o in outcomes.values() if not o.complete]}


def run_problem_fields(runs: Sequence[Any]) -> dict[str, Any]:
    """A task descriptor's problem keys from its runs (``RunRecord``s whose results name a problem); empty when
    they name none. Every run of a task names the same problem; a task whose runs disagree keeps the first's."""
    named = [r for r in runs if getattr(r.result, "problem", None) is not None]
    if not named:
        return {}
    first = named[0].result
    return {PROBLEM_KEY: first.problem, PROBLEM_TASKS_KEY: first.problem_tasks,
            RUN_SUCCESS_KEY: {str(r.run_index): bool(r.success) for r in runs}}
