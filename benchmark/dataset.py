"""Plain datasets as benchmarks, declared in the config with no code: a file of questions and answers.

::

    [datasets.capitals]
    path = "capitals.jsonl"    # .jsonl (.jsonl.gz), .csv, or hf:ORG/NAME[:split] (the hf extra: `datasets`)
    input = "question"         # the field with the task text
    target = "answer"          # the field with the expected answer (a list: any of its items is right)
    id = "qid"                 # optional; else <name>_<row>, the row counted from 0 in file order
    scorer = "exact"           # exact | numeric | includes | choice | model
    choices = "options"        # optional: a list field shown as lettered options (A) ...) after the input
    grader = "judge"           # scorer = "model": the route that grades (default: the judge's, else default)

then ``--benchmark capitals``. A relative ``path`` is relative to the config file's directory. The scorers and
their normalisation (:mod:`benchmark.answers`):

- ``exact``: the answer equals the target after SQuAD's normalisation (case, accents, punctuation, articles and
  runs of spaces removed);
- ``numeric``: the answer's number (its last marked final answer, else its last number; commas, currency and
  units ignored) equals the target's within a relative 1e-6, as GSM8K is scored;
- ``includes``: the normalised target occurs in the normalised answer as whole words;
- ``choice``: the option letter the answer gives ("B", "(B)", "ANSWER: B", or an option's exact text) equals the
  target's, which is a letter, a 0-based index, or an option's text;
- ``model``: a grader model judges the answer against the target with BrowseComp's grading template (the judge
  answers ``correct: yes|no``); without a grader reply (the scripted model in mock mode) the answer is scored
  ``exact`` and the evaluation's details say so.

Ids, given or made, are checked like every adapter's (:func:`benchmark.base.check_task_ids`): each names a
directory, so an unusable or repeated one is refused naming the file and line.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ValidationError

from benchmark.answers import lettered, score_choice, score_exact, score_includes, score_numeric, target_letter
from benchmark.base import Benchmark, Evaluation, Task, check_task_ids
from benchmark.browsecomp.grading import grader_prompt, judge_verdict
from benchmark.dataset_spec import DatasetSpec
from benchmark.environment import Environment
from benchmark.jsonl import read_jsonl_numbered
from descriptor.errors import UserError
from descriptor.extras import require_extra

HF_PREFIX = "hf:"


def _read_csv(path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            return [(f"{path}: line {reader.line_num}", row) for row in reader]
    except FileNotFoundError:
        raise UserError(f"data file not found: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"cannot read data file {path}: {exc}") from None


def _read_hf(ref: str, subset: str | None) -> list[tuple[str, dict[str, Any]]]:
    name, _, split = ref.partition(":")
    datasets = require_extra("hf", f"a dataset from the Hugging Face hub ({HF_PREFIX}{ref})")
    try:
        data = datasets.load_dataset(name, subset, split=split or "test")
    except Exception as exc:  # the hub unreachable, no such dataset or split: the library's own words
        raise UserError(f"{HF_PREFIX}{ref}: cannot load it with datasets.load_dataset: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    return [(f"{HF_PREFIX}{ref}: row {i}", dict(row)) for i, row in enumerate(data)]


def read_rows(path: str, subset: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of every row of a dataset: ``path: line N`` for files, ``hf:...: row N`` for the hub."""
    if path.startswith(HF_PREFIX):
        return _read_hf(path[len(HF_PREFIX):], subset)
    p = Path(path).expanduser()
    if p.name.endswith((".jsonl", ".jsonl.gz")):
        return [(f"{p}: line {n}", row) for n, row in read_jsonl_numbered(p)]
    if p.suffix == ".csv":
        return _read_csv(p)
    raise UserError(f"{p}: expected a .jsonl, .jsonl.gz or .csv file, or {HF_PREFIX}ORG/NAME[:split]")


def _choices(value: Any, where: str, field: str) -> list[str]:
    if isinstance(value, str):  # a CSV cell: a JSON list
        from descriptor.untrusted import BadJson, parse_json

        try:
            value = parse_json(value)
        except BadJson:
            pass
    if not isinstance(value, list) or not value or not all(isinstance(c, str | int | float) for c in value):
        raise UserError(f"{where}: field {field!r}: expected a non-empty list of options, got {value!r:.80}")
    return [str(c) for c in value]


class DatasetBenchmark(Benchmark):
    """A dataset declared in the config (``[datasets.<name>]``; see :mod:`benchmark.dataset`).

    Success: the scorer's verdict on the final answer (score 1.0 or 0.0). Data licence: the dataset's own.
    """

    name: ClassVar[str] = "dataset"
    answer_kind: ClassVar[Literal["text"]] = "text"
    license: ClassVar[str] = "the dataset's own"
    success_definition: ClassVar[str] = "the configured scorer accepts the final answer"
    option_names: ClassVar[tuple[str, ...]] = tuple(DatasetSpec.model_fields)

    def __init__(self, name: str = "dataset", **options: Any) -> None:
        super().__init__(**options)
        try:
            self.spec = DatasetSpec.model_validate(options)
        except ValidationError as err:
            raise UserError("\n".join(f"datasets.{name}.{'.'.join(map(str, e['loc'])) or '(table)'}: {e['msg']}"
                                      for e in err.errors())) from None
        self.name = name  # type: ignore[misc]  # an instance names its own dataset
        # a comparison of strings is evaluated on the loop; a grader's reply is read there too
        self.evaluation_blocks = False  # type: ignore[misc]
        self._tasks: list[Task] | None = None

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` rows in file order (``seed`` is unused: the set is fixed)."""
        if self._tasks is None:
            self._tasks = self._read()
        return self._tasks if limit is None else self._tasks[:limit]

    def _read(self) -> list[Task]:
        s = self.spec
        rows = read_rows(s.path, s.subset)
        if not rows:
            raise UserError(f"datasets.{self.name}: {s.path}: no rows")
        tasks, ids = [], []
        for i, (where, row) in enumerate(rows):
            for field in (s.input, s.target, s.id, s.choices):
                if field is not None and row.get(field) in (None, ""):
                    raise UserError(f"{where}: field {field!r} is missing or empty (datasets.{self.name}); "
                                    f"the row has: {', '.join(map(str, row)) or '(no fields)'}")
            question = row[s.input]
            if not isinstance(question, str | int | float) or isinstance(question, bool):
                raise UserError(f"{where}: field {s.input!r}: expected text, got {type(question).__name__}")
            choices = _choices(row[s.choices], where, s.choices) if s.choices else None
            target = row[s.target]
            if s.scorer == "choice" and target_letter(target, choices) is None:
                raise UserError(f"{where}: field {s.target!r}: {target!r:.80} is no option letter, 0-based index "
                                "or option text (scorer = \"choice\")")
            task_id = str(row[s.id]) if s.id else f"{self.name}_{i:04d}"
            ids.append((task_id, f"{where} ({s.id or 'row'} {task_id!r:.120})"))
            text = str(question).strip()
            tasks.append(Task(task_id=task_id, question=lettered(text, choices) if choices else text,
                              reference=target, metadata={"row": i, **({"choices": choices} if choices else {})}))
        check_task_ids(ids)
        return tasks

    def reference_answer(self, task: Task) -> str:
        if self.spec.scorer == "choice":
            return target_letter(task.reference, task.metadata.get("choices")) or ""
        ref = task.reference
        return str(ref[0] if isinstance(ref, list | tuple) and ref else ref)

    def grader_route(self) -> str | None:
        return self.spec.grader if self.spec.scorer == "model" else None

    def judge_prompt(self, task: Task, answer: str) -> str | None:
        if self.spec.scorer != "model":
            return None
        ref = task.reference
        return grader_prompt(task.question, answer, " or ".join(map(str, ref if isinstance(ref, list) else [ref])))

    def judge_fields(self, task: Task, answer: str) -> dict[str, str]:
        if self.spec.scorer != "model":
            return {}
        return {"response": answer, "correct_answer": str(self.reference_answer(task))}

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None, *,
                 judge_reply: str | None = None) -> Evaluation:
        scorer, details = self.spec.scorer, {"scorer": self.spec.scorer, "expected": task.reference}
        if scorer == "model" and judge_reply is not None:
            verdict = judge_verdict(judge_reply, answer)  # what the answer wrote cannot be the grader's verdict
            ok = verdict.correct is True
            details.update(grader="model", judge_correct=verdict.correct, judge_extracted=verdict.extracted_answer)
        elif scorer == "model":
            ok = score_exact(answer, task.reference)
            details.update(grader="exact: no grader replied (the scripted model in mock mode, or no grading call)")
        elif scorer == "choice":
            ok, details["parsed"] = score_choice(answer, task.reference, task.metadata.get("choices"))
        else:
            ok = {"exact": score_exact, "numeric": score_numeric, "includes": score_includes}[scorer](
                answer, task.reference)
        return Evaluation(success=ok, score=float(ok), details=details)
