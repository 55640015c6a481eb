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

__all__ = ["ADAPTER_KEY", "BENCHMARKS", "get_benchmark", "list_benchmarks", "spec_benchmark", "unavailable_reason"]


def list_benchmarks() -> list[str]:
    """Known benchmark names, sorted: the built-in ones, installed packages' and plugins'."""
    return BENCHMARKS.names()


ADAPTER_KEY = "adapter"
"""The option naming a generic adapter that serves a benchmark under the benchmark's own name: ``dataset`` (a
``[datasets.<name>]`` of the config, :mod:`benchmark.dataset`) or ``inspect`` (an Inspect AI task,
:mod:`benchmark.inspect_task`); written by the runtime, or by hand in ``[benchmarks.<name>]``."""


def generic_adapters() -> dict[str, type[Benchmark]]:
    """Generic adapter name -> class (:data:`ADAPTER_KEY`)."""
    from benchmark.dataset import DatasetBenchmark
    from benchmark.inspect_task import InspectBenchmark

    return {"dataset": DatasetBenchmark, "inspect": InspectBenchmark}


def spec_benchmark(spec: str) -> tuple[str, dict[str, Any]] | None:
    """(name, options) of a benchmark given by what it is rather than by name (``inspect:FILE.py@TASK``,
    ``inspect:REGISTRY/NAME``), or None for a plain name."""
    from benchmark.inspect_task import benchmark_for

    return benchmark_for(spec)


def get_benchmark(name: str, options: dict[str, Any] | None = None) -> Benchmark:
    """The adapter for ``name`` built with ``options`` (from ``[benchmarks.<name>]`` in the config).

    Options naming a generic adapter (:data:`ADAPTER_KEY`) build that adapter under ``name``. Raises
    ``UserError`` for an unknown name (listing the known ones) or an unknown option (listing the accepted ones).
    """
    options = dict(options or {})
    if ADAPTER_KEY in options:
        kind, adapters = options.pop(ADAPTER_KEY), generic_adapters()
        if kind not in adapters:
            raise UserError(f"benchmarks.{name}.{ADAPTER_KEY}: unknown adapter {kind!r}; known: {', '.join(adapters)}")
        if name in BENCHMARKS:
            raise UserError(f"benchmark {name!r}: a built-in benchmark's name; give the {kind} another name")
        cls = adapters[kind]
        _check_options(name, options, cls.option_names)
        return cls(name=name, **options)  # type: ignore[call-arg]
    if name not in BENCHMARKS:
        raise UserError(unknown_name("benchmark", name, list_benchmarks(),
                                     hint=" (or a [datasets.NAME] of the config, or inspect:FILE.py@TASK)"))
    cls = BENCHMARKS.get(name)
    _check_options(name, options, getattr(cls, "option_names", None))
    return cls(**options)


def _check_options(name: str, options: dict[str, Any], allowed: tuple[str, ...] | None) -> None:
    if allowed is not None:
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise UserError(f"benchmarks.{name}: unknown option(s) {unknown_names(unknown, allowed)}; "
                            f"accepted: {', '.join(allowed) or '(none)'}")


def unavailable_reason(name: str, options: dict[str, Any] | None = None) -> str | None:
    """Why benchmark ``name`` cannot run here (its data or package is not installed), or None when it can.

    The check loads one task the way a run does, so it names what is missing in the adapter's own words.
    """
    try:
        get_benchmark(name, options).load_tasks(1)
    except (UserError, ImportError, OSError) as err:
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    return None
