"""SciCode's problems and prompt templates, vendored in ``data/`` (Apache-2.0, see ``data/SOURCE.md``).

The 15 development problems (50 sub-steps, each with ground-truth code) and the 65 test problems (291
sub-steps, without ground truth) are small (40 kB and 165 kB gzipped), so they ship with the package like
WorkBench's data: a run needs no download. The test problems' expected values are not here (upstream keeps
them in ``test_data.h5``, which the user supplies: :mod:`benchmark.scicode.targets`).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from descriptor.errors import UserError

SPLIT_FILES = {"dev": "problems_dev.jsonl.gz", "test": "problems_all.jsonl.gz"}
HAND_WRITTEN = {("13", 6), ("62", 1), ("76", 3)}
"""(problem, step number) of the sub-steps upstream gives as context (hand-written code) instead of generating."""
_DEF_RE = re.compile(r"\b(?:def|class)\s+(\w+)\s*[(:]")


@dataclass(kw_only=True, frozen=True, slots=True)
class Step:
    """One sub-step of a problem."""

    step_id: str
    """Upstream's ``step_number``, e.g. ``10.3``."""
    index: int
    """1-based position in its problem."""
    description: str
    background: str
    header: str
    """The function header with its docstring."""
    return_line: str
    test_cases: tuple[str, ...]
    ground_truth: str | None
    """The ground-truth code (dev problems), or the hand-written code of :data:`HAND_WRITTEN`, else None."""

    @property
    def function_name(self) -> str:
        hit = _DEF_RE.search(self.header)
        return hit.group(1) if hit else ""


@dataclass(kw_only=True, frozen=True, slots=True)
class Problem:
    problem_id: str
    name: str
    dependencies: str
    """The import lines every sub-step's program starts with."""
    steps: tuple[Step, ...]


def data_text(name: str) -> str:
    """A vendored file's text (``name`` inside ``benchmark/scicode/data``; ``.gz`` files are decompressed)."""
    path = resources.files("benchmark.scicode").joinpath("data", name)
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, OSError) as exc:
        raise UserError(f"SciCode data file missing from the package: {name} ({exc}); "
                        "reinstall the project (`pip install -e .`)") from None
    return (gzip.decompress(raw) if name.endswith(".gz") else raw).decode("utf-8")


@lru_cache(maxsize=2)
def load_problems(split: str) -> tuple[Problem, ...]:
    """The problems of ``split`` (``dev`` or ``test``) in upstream's file order."""
    if split not in SPLIT_FILES:
        raise UserError(f"benchmarks.scicode.split: expected one of {', '.join(SPLIT_FILES)}, got {split!r}")
    problems = []
    for line_no, line in enumerate(data_text(SPLIT_FILES[split]).splitlines(), 1):
        row = json.loads(line)
        pid = str(row["problem_id"])
        steps = []
        for i, s in enumerate(row["sub_steps"], 1):
            code = s.get("ground_truth_code")
            if (pid, i) in HAND_WRITTEN:
                code = data_text(f"{pid}.{i}.txt")
            steps.append(Step(step_id=str(s["step_number"]), index=i, description=s["step_description_prompt"],
                              background=s.get("step_background") or "", header=s["function_header"],
                              return_line=s["return_line"], test_cases=tuple(s["test_cases"]), ground_truth=code))
        problems.append(Problem(problem_id=pid, name=row["problem_name"], dependencies=row["required_dependencies"],
                                steps=tuple(steps)))
    return tuple(problems)
