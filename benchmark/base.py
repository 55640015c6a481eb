"""What every benchmark adapter provides: tasks, and a native evaluator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal


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
    """

    name: ClassVar[str]
    answer_kind: ClassVar[Literal["number", "code", "text"]]
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
    def evaluate(self, task: Task, answer: str) -> Evaluation:
        """Judge ``answer`` (the final answer artifact, a string) against the task."""

    def info(self) -> dict[str, Any]:
        """A description for ``benchmark-info``."""
        return {
            "name": self.name,
            "answer_kind": self.answer_kind,
            "license": self.license,
            "success_definition": self.success_definition,
            "doc": (type(self).__doc__ or "").strip(),
        }
