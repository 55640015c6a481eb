"""WorkBench's outcome-centric evaluation, and its side-effect and exact-match scores.

* **success** (the paper's accuracy): the sandbox state after the run equals the
  state after executing the expected actions on a fresh copy (compared as in
  :mod:`benchmark.workbench.state`).  The final answer text plays no part.
* **side_effects** (the paper's "unwanted side effects"): the run changed the
  state and the outcome is wrong; ``wrong_changes`` counts the rows that differ
  from the expected state (a row to create that is missing, a row changed or
  deleted that should not be, ...), per table in ``wrong_changes_by_table``.
* **exact_action_match** (secondary): the calls the run made to tools that can
  change state, as a multiset, equal the expected calls (names and arguments,
  lower-cased; WorkBench's ``is_exact_match``, without its dependence on argument
  order).  Failed calls count, as in WorkBench: they were made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from benchmark.base import Evaluation
from benchmark.environment import Action
from benchmark.workbench.answers import action_key
from benchmark.workbench.environment import WorkbenchEnvironment
from benchmark.workbench.state import WorkbenchState, diff_rows
from benchmark.workbench.toolkit import TOOLS


def expected_outcome(actions: Sequence[Action]) -> tuple[WorkbenchState, list[str]]:
    """The state after ``actions`` on a fresh copy, and the error of each expected action that failed."""
    env = WorkbenchEnvironment(task_id="expected", tool_names=tuple(TOOLS))
    failures = [f"{a.name}: {r.output}" for a in actions if not (r := env.call(a.name, a.args)).ok]
    return env.state, failures


def evaluate_outcome(env: WorkbenchEnvironment, expected: Sequence[Action]) -> Evaluation:
    """The verdict on a finished run's environment against the task's expected actions."""
    target, expected_failures = expected_outcome(expected)
    final = env.state
    wrong = diff_rows(final, target)
    success = not wrong
    changed = diff_rows(final, WorkbenchState.pristine())
    log = env.actions
    made = Counter(action_key(a.name, a.args) for a in log if a.name in TOOLS and TOOLS[a.name].side_effects)
    wanted = Counter(action_key(a.name, a.args) for a in expected)
    details = {
        "outcome_match": success,
        "side_effects": bool(changed) and not success,
        "wrong_changes": sum(wrong.values()),
        "wrong_changes_by_table": wrong,
        "changed_tables": sorted(changed),
        "exact_action_match": made == wanted,
        "tool_calls": len(log),
        "failed_tool_calls": sum(not a.ok for a in log),
        "expected_actions": len(expected),
        "actions": [{"name": a.name, "args": a.args, "ok": a.ok} for a in log],
    }
    if expected_failures:  # a data problem, not the agent's: shown so it cannot pass unnoticed
        details["expected_action_failures"] = expected_failures
    return Evaluation(success=success, score=float(success), details=details)
