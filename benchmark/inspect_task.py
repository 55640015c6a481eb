"""Inspect AI tasks as benchmarks: ``--benchmark inspect:FILE.py@TASK`` or ``inspect:REGISTRY/NAME`` (the ``inspect``
extra: ``pip install 'mas-econ[inspect]'``).

The task's dataset gives the tasks and its scorers the verdict; the system under test takes the place of the
task's solver. Each sample becomes a task (its id, else its position, names the task directory): the question is
the sample's input (a chat input's messages' texts, joined by blank lines), and a sample with ``choices`` shows them
with the ``multiple_choice()`` solver's own template (answer ``ANSWER: $LETTER``). The run's final answer becomes
the ``TaskState`` the scorers read (``output.completion``, the last message), and every scorer of the task scores
it; a sample with choices has them marked from the answer by ``multiple_choice()``'s own parser, an answer it finds no
``ANSWER:`` line in read again as if it began with one ("B", "(B)", "B) 7": the systems answer in a field of their
own).

Success: the first scorer's value, as Inspect reads it (``value_to_float``: ``C`` 1, ``P`` 0.5, ``I`` 0, ``yes``,
``true``, numbers as they are; a dict or list of values: their mean), reaches ``success_at`` (default: the top of
``value_range``, [0, 1] by default: correct). The score is that value scaled from ``value_range`` to [0, 1]
(clipped; the details flag a value outside the range). A scorer on another scale says so with these two options
(WritingBench's 1-10: ``value_range = [1, 10]``, ``success_at = 8``, a threshold the user picks). Every scorer's
value, answer and explanation are in ``eval.json``; a value the scorer leaves unscored counts as a failure and
says so.

A model-graded scorer (``model_graded_qa()``, ``model_graded_fact()``, any scorer asking for the ``grader`` role
or the model under evaluation) calls the route the option ``grader`` names (default ``judge``: the judge's route,
else ``default``) through the runtime, so its tokens and cost are recorded with the evaluation; a scorer that
names a model of its own (``model="openai/gpt-4o"``) calls that model through Inspect, outside the runtime. With
the scripted double in mock mode no model grades: such a scorer's sample is unscored, and the details say why.

Samples this adapter cannot serve are refused, with a count: samples with ``files``, a ``sandbox`` or a ``setup``
script (the task's sandbox too), and chat inputs holding images, audio, video, documents or tool messages. By
default the benchmark is refused as a whole (exit 2) when any sample is; with the option
``unsupported = "skip"`` the others run and the count is printed. Inspect's epochs, message limits and solver
chain do not apply: repeated runs are ``--runs-per-task``, budgets are ``[limits]``.

Options (``[benchmarks.inspect-<task>]``): ``task`` (set by ``--benchmark inspect:...``), ``task_args`` (the
task function's arguments, as Inspect's ``-T``; a scorer's model named ``mas_econ/judge`` calls the grading route
too), ``grader``, ``unsupported``, ``value_range``, ``success_at``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import re
import sys
from pathlib import Path
from typing import Any, ClassVar, Literal

from benchmark.base import Ask, Benchmark, Evaluation, GraderUnavailable, Task, check_task_ids
from benchmark.environment import Environment
from descriptor.errors import UserError
from descriptor.extras import require_extra

PREFIX = "inspect:"
MODEL_API = "mas_econ"
"""The Inspect model API of the grading route: a model named ``mas_econ/<anything>`` (a task argument such as
WritingBench's ``judge_model="mas_econ/judge"``) calls the route of the scoring in progress."""
_ASK: contextvars.ContextVar[Ask | None] = contextvars.ContextVar("mas_econ_inspect_ask", default=None)


def benchmark_for(spec: str) -> tuple[str, dict[str, Any]] | None:
    """(benchmark name, options) of ``inspect:REF``, or None for another name. A file reference is made absolute
    (a worker process or a rollback may start elsewhere); the name is ``inspect-<task>``.

    >>> benchmark_for("inspect:inspect_evals/gsm8k")
    ('inspect-gsm8k', {'adapter': 'inspect', 'task': 'inspect_evals/gsm8k'})
    >>> benchmark_for("gsm8k") is None
    True
    """
    if not spec.startswith(PREFIX):
        return None
    ref = spec[len(PREFIX):].strip()
    file, at, task = ref.rpartition("@")
    if at and file.endswith(".py"):
        ref = f"{Path(file).expanduser().absolute()}@{task}"
    elif ref.endswith(".py") or not ref:
        raise UserError(f"--benchmark {spec}: expected inspect:FILE.py@TASK (the task's name after '@') or "
                        "inspect:REGISTRY/NAME (an installed task, e.g. inspect_evals/gsm8k)")
    else:
        task = ref.rsplit("/", 1)[-1]
    return f"inspect-{re.sub(r'[^A-Za-z0-9._-]', '_', task)}", {"adapter": "inspect", "task": ref}


@functools.lru_cache(maxsize=8)
def _load(ref: str, args_json: str) -> Any:
    """The Inspect ``Task`` ``ref`` names, built with the task arguments (JSON), once per process."""
    require_extra("inspect", f"the Inspect AI task {PREFIX}{ref}")
    from inspect_ai._eval.loader import load_tasks

    _register_model_api()  # a task may build its grader's model as it is made (mas_econ/judge)

    file = ref.rpartition("@")[0]
    if file and not Path(file).is_file():
        raise UserError(f"{PREFIX}{ref}: no such file {file}")
    try:
        tasks = load_tasks([ref], json.loads(args_json))
    except Exception as err:  # an unknown name, a task that fails to build (its dataset offline, say): its words
        raise UserError(f"{PREFIX}{ref}: Inspect could not load the task: {type(err).__name__}: "
                        f"{str(err).strip().splitlines()[0] if str(err).strip() else ''}") from None
    if len(tasks) != 1:
        raise UserError(f"{PREFIX}{ref}: names {len(tasks)} tasks; name one (FILE.py@TASK)")
    return tasks[0]


def _unservable(sample: Any, task: Any) -> str | None:
    """Why this adapter cannot serve ``sample`` (one word for the count), or None when it can."""
    from inspect_ai.model import ContentReasoning, ContentText

    if task.sandbox is not None or sample.sandbox is not None:
        return "sandbox"
    if sample.files:
        return "files"
    if sample.setup:
        return "setup"
    if isinstance(sample.input, list):
        for m in sample.input:
            if m.role not in ("system", "user", "assistant") or getattr(m, "tool_calls", None):
                return "tool messages"
            if not isinstance(m.content, str) and not all(isinstance(c, ContentText | ContentReasoning)
                                                          for c in m.content):
                return "images, audio, video or documents"
    return None


def _question(sample: Any) -> str:
    text = sample.input if isinstance(sample.input, str) else "\n\n".join(m.text for m in sample.input if m.text)
    if not sample.choices:
        return text
    from inspect_ai.solver._multiple_choice import MULTIPLE_ANSWER_TEMPLATE, SINGLE_ANSWER_TEMPLATE, prompt
    from inspect_ai.solver._task_state import Choices

    many = isinstance(sample.target, list) and len(sample.target) > 1
    return prompt(text, Choices(sample.choices), MULTIPLE_ANSWER_TEMPLATE if many else SINGLE_ANSWER_TEMPLATE)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class InspectBenchmark(Benchmark):
    """An Inspect AI task (see :mod:`benchmark.inspect_task`): its dataset and its own scorers.

    Success: the task's first scorer judges the final answer correct. Data licence: the task's own.
    """

    name: ClassVar[str] = "inspect"
    answer_kind: ClassVar[Literal["text"]] = "text"
    license: ClassVar[str] = "the Inspect task's own"
    success_definition: ClassVar[str] = "the Inspect task's first scorer judges the final answer correct"
    option_names: ClassVar[tuple[str, ...]] = ("task", "task_args", "grader", "unsupported", "value_range",
                                               "success_at")

    def __init__(self, name: str = "inspect", **options: Any) -> None:
        super().__init__(**options)
        self.name = name  # type: ignore[misc]  # an instance names its own task
        self.ref = options.get("task")
        if not isinstance(self.ref, str) or not self.ref:
            raise UserError(f"benchmarks.{name}.task: expected an Inspect task, FILE.py@TASK or REGISTRY/NAME")
        self.task_args = options.get("task_args") or {}
        if not isinstance(self.task_args, dict):
            raise UserError(f"benchmarks.{name}.task_args: expected a table of the task's arguments")
        self.grader = options.get("grader", "judge")
        self.unsupported = options.get("unsupported", "refuse")
        if self.unsupported not in ("refuse", "skip"):
            raise UserError(f'benchmarks.{name}.unsupported: expected "refuse" or "skip", got {self.unsupported!r}')
        self.value_range = options.get("value_range", [0, 1])
        if (not isinstance(self.value_range, list) or len(self.value_range) != 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in self.value_range)
                or self.value_range[0] >= self.value_range[1]):
            raise UserError(f"benchmarks.{name}.value_range: expected [LOW, HIGH] numbers, LOW < HIGH, got "
                            f"{self.value_range!r}")
        self.success_at = options.get("success_at", self.value_range[1])
        if isinstance(self.success_at, bool) or not isinstance(self.success_at, int | float):
            raise UserError(f"benchmarks.{name}.success_at: expected a number, got {self.success_at!r}")
        self._samples: dict[str, Any] | None = None

    def _task(self) -> Any:
        return _load(self.ref, json.dumps(self.task_args, sort_keys=True))

    def _served(self) -> dict[str, Any]:
        """Task id -> sample, for every sample this adapter serves (refusing the others, see the module doc)."""
        if self._samples is not None:
            return self._samples
        task = self._task()
        samples, refused = list(task.dataset), {}
        served: dict[str, Any] = {}
        for i, sample in enumerate(samples):
            if (why := _unservable(sample, task)) is not None:
                refused.setdefault(why, []).append(sample.id if sample.id is not None else i)
            else:
                served[str(sample.id) if sample.id is not None else f"{self.name}_{i:04d}"] = sample
        check_task_ids((tid, f"{PREFIX}{self.ref}: sample {i + 1}") for i, tid in enumerate(served))
        if refused:
            counts = ", ".join(f"{len(ids)} need {why} (first: {ids[0]!r})" for why, ids in refused.items())
            said = (f"{PREFIX}{self.ref}: {sum(map(len, refused.values()))} of {len(samples)} samples cannot be "
                    f"served here: {counts}")
            if self.unsupported == "refuse":
                raise UserError(f"{said}; to run the other {len(served)}, set benchmarks.{self.name}.unsupported "
                                '= "skip"')
            print(f"warning: {said}; they are skipped (benchmarks.{self.name}.unsupported = \"skip\"): "
                  f"{len(served)} samples run", file=sys.stderr)
        if not served:
            raise UserError(f"{PREFIX}{self.ref}: no sample to run")
        self._samples = served
        return served

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` served samples in dataset order (``seed`` is unused: Inspect shuffles on its own)."""
        tasks = []
        for i, (task_id, s) in enumerate(self._served().items()):
            if limit is not None and i >= limit:
                break
            meta = {"index": i, "sample_id": s.id, **({"choices": list(s.choices)} if s.choices else {}),
                    **({"sample_metadata": _jsonable(s.metadata)} if s.metadata else {})}
            tasks.append(Task(task_id=task_id, question=_question(s), reference=s.target, metadata=meta))
        return tasks

    def reference_answer(self, task: Task) -> str:
        """The target (its first item): with choices, ``ANSWER: <letters>``."""
        target = task.reference if isinstance(task.reference, list) else [task.reference]
        if task.metadata.get("choices"):
            return "ANSWER: " + ",".join(map(str, target))
        return str(target[0]) if target else ""

    def grader_route(self) -> str | None:
        return str(self.grader)

    async def grade_answer(self, task: Task, answer: str, ask: Ask) -> str | None:
        """Every scorer's Score of ``answer``, as JSON (what :meth:`evaluate` reads as ``judge_reply``)."""
        return json.dumps(await asyncio.create_task(self._score(task, answer, ask), context=contextvars.copy_context()))

    async def _score(self, task: Task, answer: str, ask: Ask | None) -> list[dict[str, Any]]:
        from inspect_ai.model import ChatMessageUser, GenerateConfig, ModelOutput, get_model
        from inspect_ai.model._model import init_active_model, init_model_roles
        from inspect_ai.scorer import Target
        from inspect_ai.solver import TaskState
        from inspect_ai.solver._multiple_choice import parse_answers, set_choices_based_on_generated_response

        _register_model_api()
        inspect_task, sample = self._task(), self._served()[task.task_id]
        _ASK.set(ask)  # in this scoring's own context (grade_answer): every mas_econ/... model calls this route
        grader = get_model(f"{MODEL_API}/{self.grader}", memoize=False)
        init_active_model(grader, GenerateConfig())  # the model "under evaluation", for scorers that ask for it
        init_model_roles({"grader": grader})
        output = ModelOutput.from_content(model=f"{MODEL_API}/system", content=answer)
        messages = [ChatMessageUser(content=sample.input)] if isinstance(sample.input, str) else list(sample.input)
        state = TaskState(model=f"{MODEL_API}/system", sample_id=sample.id if sample.id is not None else task.task_id,
                          epoch=1, input=sample.input, messages=[*messages, output.message], output=output,
                          target=Target(sample.target), choices=sample.choices, metadata=dict(sample.metadata or {}))
        if sample.choices:
            many = isinstance(sample.target, list) and len(sample.target) > 1
            chosen = parse_answers(state, many) or parse_answers(_with_completion(state, f"ANSWER: {answer}"), many)
            set_choices_based_on_generated_response(state, chosen)
        scores = []
        for scorer in inspect_task.scorer or []:
            name = _scorer_name(scorer)
            try:
                score = await scorer(state, Target(sample.target))
            except GraderUnavailable as err:
                scores.append({"scorer": name, "value": None, "explanation": f"not graded: {err}"})
                continue
            # a model-graded scorer's metadata holds its grading transcript: the explanation says what it decided
            meta = {k: v for k, v in (score.metadata or {}).items() if k != "grading"} if score else {}
            scores.append({"scorer": name, "value": None} if score is None else {
                "scorer": name, "value": _jsonable(score.value), "answer": score.answer,
                "explanation": score.explanation, **({"metadata": _jsonable(meta)} if meta else {})})
        return scores

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None, *,
                 judge_reply: str | None = None) -> Evaluation:
        """Read the scores :meth:`grade_answer` made, or score here without a grader (``benchmark-check``)."""
        scores = json.loads(judge_reply) if judge_reply is not None else asyncio.run(self._score(task, answer, None))
        if not scores:
            raise UserError(f"{PREFIX}{self.ref}: the task has no scorer")
        from inspect_ai.scorer import value_to_float

        first = scores[0]["value"]
        values = [] if first is None else list(first.values()) if isinstance(first, dict) else \
            first if isinstance(first, list) else [first]
        to_float = value_to_float()
        value = sum(to_float(v) for v in values) / len(values) if values else None
        low, high = self.value_range
        score = 0.0 if value is None else max(0.0, min(1.0, (value - low) / (high - low)))
        return Evaluation(success=value is not None and value >= self.success_at, score=score, details={
            "scorer": scores[0]["scorer"], "value": first, "explanation": scores[0].get("explanation"),
            **({"unscored": True} if first is None else {}),
            **({"outside_value_range": True} if value is not None and not low <= value <= high else {}),
            "scores": scores})


def _with_completion(state: Any, text: str) -> Any:
    from copy import copy

    from inspect_ai.model import ModelOutput

    other = copy(state)
    other.output = ModelOutput.from_content(model=state.output.model, content=text)
    return other


def _scorer_name(scorer: Any) -> str:
    from inspect_ai._util.registry import is_registry_object, registry_info

    return registry_info(scorer).name if is_registry_object(scorer) else getattr(scorer, "__name__", "scorer")


@functools.cache
def _register_model_api() -> None:
    """Register the Inspect model API that sends a scorer's model calls to the grading route (``ask``)."""
    from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, modelapi

    class GradingRoute(ModelAPI):
        def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                     config: GenerateConfig = GenerateConfig(), **_: Any) -> None:
            super().__init__(model_name=model_name, base_url=None, api_key=None, config=config)

        async def generate(self, input: list[Any], tools: list[Any], tool_choice: Any,
                           config: GenerateConfig) -> ModelOutput:
            ask = _ASK.get()
            if ask is None:
                raise GraderUnavailable("no grading route here (benchmark-check scores without a model)")
            text = await ask([(m.role, m.text) for m in input])
            return ModelOutput.from_content(model=self.model_name, content=text)

    def grading_route() -> type[ModelAPI]:
        return GradingRoute

    modelapi(name=MODEL_API)(grading_route)
