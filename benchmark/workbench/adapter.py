"""The ``workbench`` benchmark adapter: tasks with metadata, environments, evaluation."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any, ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task
from benchmark.environment import Action, Environment
from benchmark.workbench.answers import format_action, parse_action
from benchmark.workbench.data import QueryRow, query_rows
from benchmark.workbench.environment import WorkbenchEnvironment
from benchmark.workbench.evaluation import evaluate_outcome
from benchmark.workbench.toolkit import (
    SELECTIONS,
    TOOLS,
    canonical_domains,
    select_tools,
)
from descriptor.errors import UserError

# WorkBench put the date and the working hours in the agent's prompt; tasks depend on both.
PREAMBLE = ("Today is Thursday, 2023-11-30, and the time is 00:00:00; keep the current date and time in mind. "
            "Meetings must not start before 9am or end after 6pm.")
INSTRUCTION = ("Carry out the request with the tools. Only the changes your tool calls make (to the calendar, "
               "emails, analytics plots, project tasks and CRM) are graded, not your final answer.")


def task_id(row: QueryRow) -> str:
    return f"workbench_{row.source}_{row.index:03d}"


def _order_key(row: QueryRow) -> str:
    """A fixed shuffle, so that any prefix of the task list mixes domains and templates."""
    return hashlib.sha256(task_id(row).encode()).hexdigest()


def _template_numbers() -> dict[tuple[str, str], int]:
    """(source file, base template) -> 0-based template number in the file."""
    numbers: dict[tuple[str, str], int] = {}
    for row in query_rows():
        key = (row.source, row.base_template)
        numbers.setdefault(key, sum(1 for s, _ in numbers if s == row.source))
    return numbers


def _task(row: QueryRow, template_numbers: dict[tuple[str, str], int]) -> Task:
    n = len(row.answer)
    domains = canonical_domains(row.domains)
    return Task(
        task_id=task_id(row),
        question=f"{PREAMBLE}\n\n{row.query}\n\n{INSTRUCTION}",
        reference={"answer": list(row.answer), "domains": list(domains)},
        metadata={
            "query": row.query, "source": row.source, "row": row.index, "domains": list(domains),
            "multi_domain": len(domains) > 1, "base_template": row.base_template,
            "chosen_template": row.chosen_template,
            "template": template_numbers[(row.source, row.base_template)],
            "expected_actions": n, "action_class": "none" if n == 0 else "single" if n == 1 else "multi",
        },
    )


@BENCHMARKS.register("workbench")
class WorkbenchBenchmark(Benchmark):
    """WorkBench: 690 workplace tasks acted out with tools on five sandbox databases (calendar, email,
    website analytics, customer relationship manager, project management) and a company directory.

    The agents get the task's tools (option ``tools``: ``"all"``, every tool, the
    default as in WorkBench's main setting; ``"domain"``, the task's domains plus
    the company directory) acting on an environment of their own; the answer text
    is not graded.
    Success (outcome-centric, as in the paper): the sandbox state after the run
    equals the state after executing the task's expected actions on a fresh copy
    (text compared case-insensitively except status, list and board names).
    Secondary scores in ``Evaluation.details``: ``side_effects`` (the state
    changed but is wrong), ``wrong_changes`` (rows that differ from the expected
    state) and ``exact_action_match``.  122 tasks expect no action at all.
    Data licence: MIT (Styles et al. 2024, arXiv 2405.00823, olly-styles/WorkBench
    at 42f1b6d), vendored in ``benchmark/workbench/data`` with its LICENSE.
    """

    name: ClassVar[str] = "workbench"
    answer_kind: ClassVar[Literal["actions"]] = "actions"
    license: ClassVar[str] = "MIT (WorkBench, Styles et al. 2024, olly-styles/WorkBench)"
    success_definition: ClassVar[str] = ("sandbox state after the run == state after the expected actions "
                                         "on a fresh copy (outcome-centric)")
    option_names: ClassVar[tuple[str, ...]] = ("tools",)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        selection = self.options.get("tools", "all")
        if selection not in SELECTIONS:
            raise UserError(f"benchmarks.workbench.tools: expected \"domain\" or \"all\", got {selection!r}")
        self.selection = selection

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` tasks in a fixed mixed order (``seed`` is unused: the set is fixed)."""
        numbers = _template_numbers()
        rows = sorted(query_rows(), key=_order_key)
        return [_task(r, numbers) for r in (rows if limit is None else rows[:limit])]

    def make_environment(self, task: Task) -> WorkbenchEnvironment:
        return WorkbenchEnvironment(task_id=task.task_id,
                                    tool_names=select_tools(self.selection, task.reference["domains"]))

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        if not isinstance(environment, WorkbenchEnvironment):
            raise UserError(f"benchmark workbench judges the run's environment, not the answer text: "
                            f"evaluate({task.task_id}) got {type(environment).__name__}; the runtime must pass "
                            "the environment from make_environment (or the chosen fork)")
        if environment.task_id != task.task_id:
            raise ValueError(f"environment of {environment.task_id} evaluated for {task.task_id}")
        return evaluate_outcome(environment, self.reference_actions(task))

    def reference_actions(self, task: Task) -> list[Action]:
        return [parse_action(a) for a in task.reference["answer"]]

    def reference_answer(self, task: Task) -> str:
        actions = self.reference_actions(task)
        return "Done: " + "; ".join(map(format_action, actions)) if actions else "Nothing to do."

    def info(self) -> dict[str, Any]:
        rows = query_rows()
        by_source = Counter(r.source for r in rows)
        by_domains = Counter(" + ".join(canonical_domains(r.domains)) for r in rows if r.source == "multi_domain")
        return {
            **super().info(),
            "tasks": len(rows),
            "tasks_per_domain": dict(by_source),
            "multi_domain_combinations": dict(by_domains.most_common()),
            "tasks_without_action": sum(not r.answer for r in rows),
            "options": {"tools": self.selection, "accepted": {"tools": list(SELECTIONS)}},
            "tools_by_domain": {d: [s.name.split(".", 1)[1] for s in TOOLS.values() if s.domain == d]
                                for d in dict.fromkeys(s.domain for s in TOOLS.values())},
            "tools_with_side_effects": [s.name for s in TOOLS.values() if s.side_effects],
            "function_names": "models see <domain>__<function> (OpenAI function names allow no dots)",
            "evaluation": ("success: state after the run == state after the expected actions on a fresh copy; "
                           "details: side_effects (state changed but wrong), wrong_changes (rows differing "
                           "from the expected state), exact_action_match (state-changing calls == expected)"),
            "current_time": "2023-11-30 00:00:00 (Thursday)",
        }
