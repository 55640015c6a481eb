"""``scicode``: SciCode (Tian et al., NeurIPS 2024 D&B), scientific research code in multi-step problems."""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from benchmark.base import BENCHMARKS, Benchmark, Evaluation, Task, check_task_ids
from benchmark.environment import Environment
from benchmark.sandbox import RemoteTests, run_remote_tests
from benchmark.scicode.data import HAND_WRITTEN, Problem, Step, load_problems
from benchmark.scicode.prompts import answer_code, step_prompt
from benchmark.scicode.targets import clean_test_case, compares_no_target, computed_targets, h5_targets, step_program
from descriptor.errors import UserError
from descriptor.problems import UNTARGETED_KEY

COMPARE_SOURCE = (Path(__file__).parent / "compare.py").read_text(encoding="utf-8")
"""The comparison helpers' text, run in the judge (and beside the ground truth when targets are computed)."""


# A test case that seeds numpy's generator (47.4's Monte Carlo: np.random.seed(1024), then MC(...)) relies on one
# process, as upstream runs it: the seed reaches the candidate's generator too, so its draws are upstream's.
SEED_CANDIDATE = "def __seed__(*args, **kwargs):\n    import numpy\n    numpy.random.seed(*args, **kwargs)\n"
SEED_BOTH = """
import numpy as __numpy
__judge_seed = __numpy.random.seed
def __seed_both(*args, **kwargs):
    __judge_seed(*args, **kwargs)
    __seed__(*args, **kwargs)
__numpy.random.seed = __seed_both
"""


def task_id(step_id: str) -> str:
    """The task id of sub-step ``step_id`` (upstream's ``10.3``): ``scicode_10.3``."""
    return f"scicode_{step_id}"


@lru_cache(maxsize=4)
def _steps(split: str) -> dict[str, tuple[Problem, Step]]:
    """Task id -> (problem, sub-step) for the generated sub-steps of ``split`` (the hand-written ones are context)."""
    out = {task_id(s.step_id): (p, s) for p in load_problems(split) for s in p.steps if (p.problem_id, s.index)
           not in HAND_WRITTEN}
    check_task_ids((tid, f"SciCode {split} sub-step {s.step_id}") for tid, (_, s) in out.items())
    return out


@BENCHMARKS.register("scicode")
class SciCodeBenchmark(Benchmark):
    """SciCode: scientific research code, as problems of several sub-steps (one task per sub-step).

    Each task is one sub-step in upstream's multi-step protocol: the prompt (upstream's templates,
    :mod:`benchmark.scicode.prompts`) carries the previous sub-steps' descriptions and code, and the answer is the
    next step's function in a ```python block. The previous code is the ground truth (upstream uses the model's
    own earlier answers; here every sub-step is an independent task), and the three sub-steps upstream gives as
    hand-written context (13.6, 62.1, 76.3) are context, not tasks. Success: the program made of the problem's
    dependencies, the previous sub-steps' code and the answer passes every test case of the sub-step, run as
    upstream writes them (``target = targets[i]`` then the asserts) in a trusted judge that calls the answer's
    functions in a separate sandbox (:mod:`benchmark.sandbox.remote`), so the answer cannot forge a pass. A
    problem is solved in run r when all its sub-steps passed in run r (each task's metadata names its ``problem``
    and the problem's ``problem_tasks``; :mod:`descriptor.problems`; ``benchmark-check``, the summaries and the
    report give both). Sub-steps none of whose tests compares a target (78.1, 78.2) carry
    ``tests_compare_no_target`` in their metadata and eval details: their passes check properties, not upstream's
    values.
    Targets: for ``split = "dev"`` (15 problems, 50 sub-steps) computed once from the ground truth in the
    sandbox and cached per user (:mod:`benchmark.scicode.targets`); for ``split = "test"`` (65 problems, 288
    generated sub-steps) read from upstream's ``test_data.h5`` given as ``targets`` (needs h5py:
    ``pip install 'mas-econ[scicode]'``). Test problems have no ground truth, so their later sub-steps see the
    earlier ones' headers only and the answer must define any earlier function it calls.
    Comparison rules: upstream's (``np.allclose``, dicts, tuples and lists of arrays; :mod:`benchmark.scicode.compare`).
    Score = 1.0 on success, else 0.0. Data licence: Apache-2.0 (vendored, ``benchmark/scicode/data``).
    Options: ``split`` (dev | test), ``with_background`` (bool, default false: upstream's default prompt),
    ``targets`` (path to test_data.h5), ``timeout_s`` (s per sub-step, default 1800 as upstream: problem 51's molecular
    dynamics takes minutes), ``memory_mb`` (MB, default 4096), ``isolation`` (see :mod:`benchmark.sandbox`).
    """

    name: ClassVar[str] = "scicode"
    answer_kind: ClassVar[Literal["code"]] = "code"
    license: ClassVar[str] = "Apache-2.0 (SciCode)"
    success_definition: ClassVar[str] = "the sub-step's test cases pass against upstream's targets in the judge"
    option_names: ClassVar[tuple[str, ...]] = ("split", "with_background", "targets", "timeout_s", "memory_mb",
                                               "isolation")

    def _split(self) -> str:
        split = str(self.options.get("split", "dev"))
        if split == "test" and not self.options.get("targets"):
            raise UserError("benchmarks.scicode.split = \"test\" needs benchmarks.scicode.targets: the path to "
                            "upstream's test_data.h5 (the test problems' expected values are not distributed "
                            "with the problems)")
        return split

    def load_tasks(self, limit: int | None = None, seed: int = 0) -> list[Task]:
        """The sub-steps in upstream's order (``seed`` is unused: the set is fixed)."""
        split = self._split()
        with_background = bool(self.options.get("with_background", False))
        steps = _steps(split)
        sizes = Counter(problem.problem_id for problem, _ in steps.values())
        tasks = []
        for tid, (problem, step) in steps.items():
            untargeted = {UNTARGETED_KEY: True} if compares_no_target(step) else {}
            tasks.append(Task(task_id=tid, question=step_prompt(problem, step, with_background),
                              reference={"split": split, "step": step.step_id},
                              metadata={"problem": problem.problem_id, "problem_tasks": sizes[problem.problem_id],
                                        "step": step.step_id, "entry_point": step.function_name, **untargeted}))
        return tasks if limit is None else tasks[:limit]

    def _located(self, task: Task) -> tuple[Problem, Step]:
        return _steps(task.reference["split"])[task_id(task.reference["step"])]

    def reference_answer(self, task: Task) -> str:
        """The ground truth in a ```python block (test problems have none: an empty answer)."""
        _, step = self._located(task)
        return f"```python\n{step.ground_truth}\n```" if step.ground_truth else ""

    def sandbox_isolation(self) -> str:
        return str(self.options.get("isolation", "namespaces"))

    def targets(self, task: Task) -> list[Any]:
        """The expected values of ``task``'s test cases (computed and cached, or from test_data.h5)."""
        problem, step = self._located(task)
        if self.options.get("targets"):
            return h5_targets(str(self.options["targets"]), step)
        return computed_targets(problem, step, COMPARE_SOURCE, isolation=self.sandbox_isolation())

    def evaluate(self, task: Task, answer: str, environment: Environment | None = None) -> Evaluation:
        problem, step = self._located(task)
        code = answer_code(answer or "", step.function_name)
        if not code.strip():
            return Evaluation(success=False, score=0.0,
                              details={"error": "empty answer", "problem": problem.problem_id})
        cases = [f"target = targets[{i}]\n{clean_test_case(case)}" for i, case in enumerate(step.test_cases)]
        setup, candidate_setup, remote = f"{problem.dependencies}\n{COMPARE_SOURCE}", "", (step.function_name,)
        if any("np.random.seed" in case for case in step.test_cases):
            setup, candidate_setup, remote = setup + SEED_BOTH, SEED_CANDIDATE, (*remote, "__seed__")
        tests = RemoteTests(tests="\n\n".join(cases), trusted_setup=setup, candidate_setup=candidate_setup,
                            values={"targets": self.targets(task)}, remote=remote)
        result = run_remote_tests(step_program(problem, step, code), tests,
                                  timeout_s=float(self.options.get("timeout_s", 1800.0)),
                                  memory_mb=int(self.options.get("memory_mb", 4096)),
                                  isolation=self.sandbox_isolation()).details()
        ok = result.pop("passed")
        untargeted = {UNTARGETED_KEY: True} if compares_no_target(step) else {}
        return Evaluation(success=ok, score=float(ok), details={"problem": problem.problem_id, **untargeted, **result})

