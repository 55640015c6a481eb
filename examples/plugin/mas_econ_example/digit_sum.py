"""``digit_sum``: the sum of a number's decimal digits (generated, offline), as a benchmark adapter.

A new benchmark is one class: tasks, a native evaluator, a reference answer; ``@BENCHMARKS.register`` names it.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task
from benchmark.environment import Environment
from benchmark.numeric import extract_number, numbers_equal


@BENCHMARKS.register("digit_sum")
class DigitSumBenchmark(Benchmark):
    """The sum of the decimal digits of a 4-7 digit number.

    Options: ``count`` (tasks, default 20).
    Success: the answer's number (:func:`benchmark.numeric.extract_number`) equals the digit sum.
    Data licence: generated in code, no external data.
    """

    name: ClassVar[str] = "digit_sum"
    answer_kind: ClassVar[Literal["number"]] = "number"
    license: ClassVar[str] = "generated (example plugin)"
    success_definition: ClassVar[str] = "the answer's number (its marked final answer, else its last) == digit sum"
    option_names: ClassVar[tuple[str, ...]] = ("count",)

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        count = limit if limit is not None else int(self.options.get("count", 20))
        rng = random.Random(seed)
        tasks = []
        for i in range(count):
            n = rng.randrange(1_000, 10_000_000)
            tasks.append(Task(task_id=f"digit_sum_{seed}_{i:04d}", question=(
                f"What is the sum of the decimal digits of {n}? Give the sum as a whole number."),
                reference=sum(int(d) for d in str(n)), metadata={"number": n}))
        return tasks

    def reference_answer(self, task: Task) -> str:
        return str(task.reference)

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        got = extract_number(answer)
        ok = got is not None and numbers_equal(got, task.reference)
        details: dict[str, Any] = {"parsed": got, "expected": task.reference}
        return Evaluation(success=ok, score=float(ok), details=details)
