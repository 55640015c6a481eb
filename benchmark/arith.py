"""``arith``: seeded synthetic multi-step arithmetic word problems, generated in code.

Success: the answer's number (its marked final answer, else its last) equals the exact integer result.
Licence: generated here; no external data.
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task
from benchmark.environment import Environment
from benchmark.numeric import extract_number, numbers_equal
from descriptor.errors import UserError

_ACTORS = ["A bakery", "A library", "A warehouse", "A farm", "A school", "A workshop"]
_UNITS = ["items", "crates", "books", "tokens", "parts", "boxes"]
# One phrasing per operation, so the scripted model can read a problem back.
_PHRASES = {
    "+": "Then it gains {n} more {unit}.",
    "-": "Then it loses {n} {unit}.",
    "*": "Then its count of {unit} is multiplied by {n}.",
}
_STEP_RE = re.compile(
    r"gains (?P<add>\d+) more|loses (?P<sub>\d+)|multiplied by (?P<mul>\d+)"
)
_START_RE = re.compile(r"starts with (\d+)")


MIN_OPS, MAX_OPS = 3, 5
"""Operations per problem by default (options ``min_ops``, ``max_ops``)."""


def generate(index: int, seed: int, min_ops: int = MIN_OPS,
             max_ops: int = MAX_OPS) -> tuple[str, list[tuple[str, int]], int, int]:
    """Problem ``index`` of the set for ``seed``, with ``min_ops``..``max_ops`` operations: (question, ops, start,
    answer).

    >>> len(generate(0, 0, min_ops=12, max_ops=12)[1])
    12
    """
    rng = random.Random(f"arith:{seed}:{index}")
    actor, unit = rng.choice(_ACTORS), rng.choice(_UNITS)
    start = rng.randint(5, 60)
    value, ops = start, []
    for _ in range(rng.randint(min_ops, max_ops)):
        op = rng.choice("+-*") if value < 400 else rng.choice("+-")
        if op == "+":
            n = rng.randint(2, 40)
        elif op == "-":
            n = rng.randint(1, max(1, value - 1))
        else:
            n = rng.randint(2, 4)
        value = apply(value, op, n)
        ops.append((op, n))
    lines = [f"{actor} starts with {start} {unit}."]
    lines += [_PHRASES[op].format(n=n, unit=unit) for op, n in ops]
    lines.append(f"How many {unit} does it have at the end?")
    return " ".join(lines), ops, start, value


def apply(value: int, op: str, n: int) -> int:
    """One arithmetic step."""
    return value + n if op == "+" else value - n if op == "-" else value * n


def parse(question: str) -> tuple[int, list[tuple[str, int]]] | None:
    """Read an ``arith`` problem back into (start, ops); None if it is not one."""
    m = _START_RE.search(question)
    if not m:
        return None
    ops = []
    for s in _STEP_RE.finditer(question):
        if s["add"]:
            ops.append(("+", int(s["add"])))
        elif s["sub"]:
            ops.append(("-", int(s["sub"])))
        else:
            ops.append(("*", int(s["mul"])))
    return (int(m.group(1)), ops) if ops else None


@BENCHMARKS.register("arith")
class ArithBenchmark(Benchmark):
    """Synthetic multi-step arithmetic (3-5 operations on an integer by default).

    Options: ``count`` (tasks, default 50), ``min_ops``/``max_ops`` (operations per problem, default 3 and 5;
    longer problems make longer runs, e.g. for rollback scenarios; an agent makes one calculator call per
    operation, up to ``mas.max_tool_iterations``).
    Success: the answer's number (:func:`benchmark.numeric.extract_number`) equals the exact result.
    Data licence: generated in code, no external data.
    """

    name: ClassVar[str] = "arith"
    answer_kind: ClassVar[Literal["number"]] = "number"
    license: ClassVar[str] = "generated (project licence)"
    success_definition: ClassVar[str] = "the answer's number (its marked final answer, else its last) == exact result"
    option_names: ClassVar[tuple[str, ...]] = ("count", "min_ops", "max_ops")
    evaluation_blocks: ClassVar[bool] = False  # a comparison of strings: evaluated on the loop

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        lo, hi = options.get("min_ops", MIN_OPS), options.get("max_ops", MAX_OPS)
        for key, v in (("min_ops", lo), ("max_ops", hi)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UserError(f"benchmarks.arith.{key}: expected a whole number of operations >= 1, got {v!r}")
        if lo > hi:
            raise UserError(f"benchmarks.arith.min_ops ({lo}) must not exceed benchmarks.arith.max_ops ({hi})")
        self.min_ops, self.max_ops = lo, hi

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        count = limit if limit is not None else int(self.options.get("count", 50))
        tasks = []
        for i in range(count):
            q, ops, start, answer = generate(i, seed, self.min_ops, self.max_ops)
            tasks.append(Task(task_id=f"arith_{seed}_{i:04d}", question=q, reference=answer,
                              metadata={"start": start, "ops": ops}))
        return tasks

    def reference_answer(self, task: Task) -> str:
        return str(task.reference)

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        got = extract_number(answer)
        ok = got is not None and numbers_equal(got, task.reference)
        return Evaluation(success=ok, score=float(ok), details={"parsed": got, "expected": task.reference})
