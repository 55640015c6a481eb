"""Benchmark names to adapter classes, and construction with checked options.

>>> list_benchmarks()
['arith', 'browsecomp', 'gsm8k', 'humaneval', 'mbpp', 'reasoning_gym', 'workbench']
>>> get_benchmark("arith").load_tasks(1)[0].task_id
'arith_0_0000'
"""

from __future__ import annotations

from typing import Any

from benchmark.arith import ArithBenchmark
from benchmark.base import Benchmark
from benchmark.browsecomp import BrowseCompBenchmark
from benchmark.gsm8k import GSM8KBenchmark
from benchmark.humaneval import HumanEvalBenchmark
from benchmark.mbpp import MBPPBenchmark
from benchmark.reasoning_gym import ReasoningGymBenchmark
from benchmark.workbench import WorkbenchBenchmark
from descriptor.errors import UserError

BENCHMARKS: dict[str, type[Benchmark]] = {
    "arith": ArithBenchmark,
    "browsecomp": BrowseCompBenchmark,
    "gsm8k": GSM8KBenchmark,
    "humaneval": HumanEvalBenchmark,
    "mbpp": MBPPBenchmark,
    "reasoning_gym": ReasoningGymBenchmark,
    "workbench": WorkbenchBenchmark,
}


def list_benchmarks() -> list[str]:
    """Known benchmark names, sorted."""
    return sorted(BENCHMARKS)


def get_benchmark(name: str, options: dict[str, Any] | None = None) -> Benchmark:
    """The adapter for ``name`` built with ``options`` (from ``[benchmarks.<name>]`` in the config).

    Raises ``UserError`` for an unknown name (listing the known ones) or an
    unknown option (listing the accepted ones).
    """
    cls = BENCHMARKS.get(name)
    if cls is None:
        raise UserError(f"unknown benchmark {name!r}; known benchmarks: {', '.join(list_benchmarks())}")
    options = dict(options or {})
    allowed = getattr(cls, "option_names", None)
    if allowed is not None:
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise UserError(f"benchmarks.{name}: unknown option(s) {', '.join(unknown)}; "
                            f"accepted: {', '.join(allowed) or '(none)'}")
    return cls(**options)


def unavailable_reason(name: str, options: dict[str, Any] | None = None) -> str | None:
    """Why benchmark ``name`` cannot run here (its data or package is not installed), or None when it can.

    The check loads one task the way a run does, so it names what is missing in the adapter's own words.
    """
    try:
        get_benchmark(name, options).load_tasks(1)
    except (UserError, ImportError, OSError) as err:
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    return None
