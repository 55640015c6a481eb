"""Benchmark names to adapter classes (:data:`BENCHMARKS`, one registry for built-in, installed and plugin
adapters), and construction with checked options.

>>> list_benchmarks()
['arith', 'browsecomp', 'gsm8k', 'humaneval', 'mbpp', 'reasoning_gym', 'scicode', 'workbench']
>>> get_benchmark("arith").load_tasks(1)[0].task_id
'arith_0_0000'
"""

from __future__ import annotations

from typing import Any

# The built-in adapters register themselves in BENCHMARKS when their modules are imported.
import benchmark.arith  # noqa: F401
import benchmark.browsecomp  # noqa: F401
import benchmark.gsm8k  # noqa: F401
import benchmark.humaneval  # noqa: F401
import benchmark.mbpp  # noqa: F401
import benchmark.reasoning_gym  # noqa: F401
import benchmark.scicode  # noqa: F401
import benchmark.workbench  # noqa: F401
from benchmark.base import BENCHMARKS, Benchmark
from descriptor.errors import UserError
from descriptor.suggest import unknown_name, unknown_names

__all__ = ["BENCHMARKS", "get_benchmark", "list_benchmarks", "unavailable_reason"]


def list_benchmarks() -> list[str]:
    """Known benchmark names, sorted: the built-in ones, installed packages' and plugins'."""
    return BENCHMARKS.names()


def get_benchmark(name: str, options: dict[str, Any] | None = None) -> Benchmark:
    """The adapter for ``name`` built with ``options`` (from ``[benchmarks.<name>]`` in the config).

    Raises ``UserError`` for an unknown name (listing the known ones) or an
    unknown option (listing the accepted ones).
    """
    if name not in BENCHMARKS:
        raise UserError(unknown_name("benchmark", name, list_benchmarks()))
    cls = BENCHMARKS.get(name)
    options = dict(options or {})
    allowed = getattr(cls, "option_names", None)
    if allowed is not None:
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise UserError(f"benchmarks.{name}: unknown option(s) {unknown_names(unknown, allowed)}; "
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
