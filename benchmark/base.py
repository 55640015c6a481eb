"""What every benchmark adapter provides: tasks, a native evaluator, a reference solution, and
optionally a per-run environment (see :mod:`benchmark.environment`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from benchmark.environment import Action, Environment


@dataclass(kw_only=True, frozen=True, slots=True)
class Task:
    """One benchmark item."""

    task_id: str
    """Stable id, safe as a directory name."""
    question: str
    """The prompt shown to the agents."""
    reference: Any
    """Ground truth the evaluator compares against (never shown to agents)."""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True, slots=True)
class Evaluation:
    """The benchmark's verdict on one answer."""

    success: bool
    score: float
    """In [0, 1]."""
    details: dict[str, Any] = field(default_factory=dict)


class Benchmark(ABC):
    """An adapter: loads tasks offline and evaluates answers the benchmark's own way.

    Subclasses set the class attributes below and document their success
    definition and data licence in the class docstring.

    A benchmark whose tasks are solved by acting overrides
    :meth:`make_environment`: the runtime then gives the agents the
    environment's tools (a fork per agent working in parallel) and passes the
    environment holding the run's outcome to :meth:`evaluate`.  Benchmarks
    without one (the default) judge the answer string alone.
    """

    name: ClassVar[str]
    answer_kind: ClassVar[Literal["number", "code", "text", "actions"]]
    """``actions``: the outcome is what the agents did in the environment, not the answer text."""
    license: ClassVar[str]
    success_definition: ClassVar[str]
    option_names: ClassVar[tuple[str, ...]] = ()
    """Options the adapter accepts from ``[benchmarks.<name>]`` in the config."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    @abstractmethod
    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` tasks in a fixed order (``seed`` only for generated sets)."""

    @abstractmethod
    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        """Judge ``answer`` (the final answer artifact, a string) against the task.

        ``environment``: the run's environment after the run (the one
        :meth:`make_environment` made, or the fork whose outcome was chosen);
        None for benchmarks without one, which ignore it.
        """

    def make_environment(self, task: Task) -> Environment | None:
        """A fresh environment for one run of ``task``, or None (the default: answers are judged as text)."""
        return None

    @abstractmethod
    def reference_answer(self, task: Task) -> str:
        """The answer a perfect solver would give (``benchmark-check`` runs it through :meth:`evaluate`)."""

    def reference_actions(self, task: Task) -> list[Action]:
        """The tool calls that solve ``task`` in a fresh environment ([] for benchmarks without one)."""
        return []

    def recorded_task(self, task: Task) -> Task:
        """``task`` as run files record it (metadata, trajectory): as it is, by default.

        A benchmark whose questions must not be written in clear text (BrowseComp encrypts its data
        against leaking into training sets) returns a copy with a placeholder question, and
        :meth:`restored_task` gives the task back from that record (a resumed run needs it).
        """
        return task

    def restored_task(self, recorded: Task) -> Task:
        """The task a record made by :meth:`recorded_task` stands for (default: the record itself)."""
        return recorded

    def judge_prompt(self, task: Task, answer: str) -> str | None:
        """The prompt an LLM judge grades ``answer`` by, or None (the default: :meth:`evaluate` alone decides).

        A benchmark graded by a judge returns its grading prompt; when the experiment configures a
        ``judge`` route the runtime sends the prompt there and passes the reply to :meth:`evaluate` as
        the keyword ``judge_reply`` (such a benchmark's ``evaluate`` accepts it, and grades without a
        judge when it is None).
        """
        return None

    def sandbox_isolation(self) -> str | None:
        """How :meth:`evaluate` isolates the code it runs (:mod:`benchmark.sandbox`); None: it runs no code."""
        return None

    def info(self) -> dict[str, Any]:
        """A description for ``benchmark-info``."""
        return {
            "name": self.name,
            "answer_kind": self.answer_kind,
            "license": self.license,
            "success_definition": self.success_definition,
            "doc": (type(self).__doc__ or "").strip(),
        }
