"""What every benchmark adapter provides: tasks, a native evaluator, a reference solution, and
optionally a per-run environment (see :mod:`benchmark.environment`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from descriptor.errors import UserError
from descriptor.registry import Registry

if TYPE_CHECKING:
    from benchmark.environment import Action, Environment


Ask = Callable[[list[tuple[str, str]]], Awaitable[str]]
"""Sends chat messages, ``(role, text)`` pairs (``system``, ``user``, ``assistant``), to a benchmark's grading route
and returns the reply's text (:meth:`Benchmark.grade_answer`)."""


class GraderUnavailable(Exception):
    """No model grades here: the grading route is the scripted double in mock mode (``--model scripted``)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Task:
    """One benchmark item."""

    task_id: str
    """Stable id, safe as a directory name (:func:`check_task_ids`)."""
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
    evaluation_blocks: ClassVar[bool] = True
    """True (the default): :meth:`evaluate` may take long (it runs code, reads databases, calls a service; with an
    environment, the run's actions are replayed into a fresh one first), so the runner calls it, and writes the
    run's files after it, in a worker thread, off the sweep's event loop. An adapter without an environment whose
    evaluation is a quick comparison of strings sets False: it is evaluated, and the run's files
    (a failed run's checkpoints too) are written, on the loop, a few ms of blocking per finished run, where the
    hop to a thread and back cost ~5 ms of CPU a run on 2 shared cores, more than such an evaluation."""

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

    def judge_fields(self, task: Task, answer: str) -> dict[str, str]:
        """What :meth:`judge_prompt` is filled with, by name (BrowseComp: ``response``, ``correct_answer``); {} by
        default. The runtime sends them with the grading call as its hints, so a test double grades without
        reading the prompt back; no real model sees them."""
        return {}

    def grader_route(self) -> str | None:
        """The route that must grade this benchmark's answers, or None (the default: a judge grades through
        :meth:`judge_prompt` only when the experiment configures one).

        A name under ``[models]`` or ``[roles]``, or ``judge``: the judge role's route, which falls back to
        ``default``. The runtime then always grades, through :meth:`grade_answer`, with that route.
        """
        return None

    async def grade_answer(self, task: Task, answer: str, ask: Ask) -> str | None:
        """The reply :meth:`evaluate` reads as ``judge_reply``, or None (not graded).

        By default :meth:`judge_prompt` sent as one user message. A benchmark whose own scorer talks to a model
        (Inspect AI's model-graded scorers) overrides it and calls ``ask`` as often as it needs; ``ask`` raises
        :class:`GraderUnavailable` where no model grades (the scripted double in mock mode).
        """
        prompt = self.judge_prompt(task, answer)
        return None if prompt is None else await ask([("user", prompt)])

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


MAX_TASK_ID_CHARS = 100
"""The longest task id (characters); a task id names a directory, and file names end at 255 bytes."""
MAX_TASK_ID_BYTES = 200
"""The longest task id in UTF-8 (bytes): 100 characters outside ASCII can pass 255 bytes."""


def task_id_problem(task_id: object) -> str | None:
    """Why ``task_id`` cannot name a task directory, or None when it can.

    >>> task_id_problem("HumanEval_0"), task_id_problem(".."), task_id_problem("a\\x00b")
    (None, "starts with '.' (., .. and hidden names are no task directory)", 'holds a control character')
    """
    if not isinstance(task_id, str) or not task_id:
        return "is empty" if task_id == "" else f"is not a string ({type(task_id).__name__})"
    if task_id.startswith("."):
        return "starts with '.' (., .. and hidden names are no task directory)"
    if "/" in task_id:
        return "holds '/' (a task id is one directory name)"
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in task_id):
        return "holds a control character"
    if len(task_id) > MAX_TASK_ID_CHARS:
        return f"is {len(task_id)} characters long (at most {MAX_TASK_ID_CHARS})"
    try:
        size = len(task_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid Unicode text (it holds a lone surrogate)"
    if size > MAX_TASK_ID_BYTES:
        return f"is {size} bytes long in UTF-8 (at most {MAX_TASK_ID_BYTES})"
    return None


def check_task_ids(ids: Iterable[tuple[str, str]]) -> None:
    """Refuse task ids that cannot each name their own directory: :func:`task_id_problem`, or the same id twice.

    ``ids``: (task id as it names the directory, where it comes from, e.g. ``data.jsonl: line 3``). Two tasks
    with one id would run into one directory and be counted as one. Raises :class:`UserError` naming every
    offending id (the first 10) and where each comes from.
    """
    problems: list[str] = []
    first: dict[str, str] = {}
    for task_id, where in ids:
        if (why := task_id_problem(task_id)) is not None:
            problems.append(f"{where}: task id {task_id!r:.120} {why}")
        elif task_id in first:
            problems.append(f"{where}: task id {task_id!r} is also the id of {first[task_id]} "
                            "(each task needs its own id: it names the task's directory)")
        else:
            first[task_id] = where
    if problems:
        more = f"\n... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise UserError("unusable task ids:\n" + "\n".join(problems[:10]) + more)
BENCHMARKS: Registry[type[Benchmark]] = Registry("benchmark", "mas_econ.benchmarks")
"""Benchmark name -> adapter class: each adapter module registers its class (``@BENCHMARKS.register("arith")``),
installed packages through the ``mas_econ.benchmarks`` entry-point group, other code as a plugin
(``--plugin MODULE``). Read it through :mod:`benchmark.registry`, which imports the built-in adapters."""
