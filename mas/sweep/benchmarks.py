"""Benchmark adapters as runs use them: options with the sandbox's isolation default, and the isolation check."""

from __future__ import annotations

from typing import Any

from benchmark.base import Benchmark
from benchmark.registry import BENCHMARKS, get_benchmark
from benchmark.sandbox import require_isolation
from mas.config import ExperimentConfig


def benchmark_options(cfg: ExperimentConfig, name: str) -> dict[str, Any]:
    """``[benchmarks.<name>]``, with ``isolation`` defaulting to ``sandbox.isolation`` for adapters that run code.

    One setting decides how model-written code is isolated, whether an agent
    runs it (the python tool) or the benchmark does (evaluation).
    """
    options = dict(cfg.benchmarks.get(name) or {})
    if name in BENCHMARKS and "isolation" in BENCHMARKS[name].option_names:
        options.setdefault("isolation", cfg.sandbox.isolation)
    return options


def run_benchmark(cfg: ExperimentConfig, name: str) -> Benchmark:
    """The adapter ``name`` as a run of ``cfg`` evaluates with it (:func:`benchmark_options`)."""
    return get_benchmark(name, benchmark_options(cfg, name))


def check_isolation(cfg: ExperimentConfig, benches: dict[str, Benchmark]) -> None:
    """Refuse to start when model-written code would run under isolation this machine cannot provide.

    Agents may call the python tool in any benchmark, so ``sandbox.isolation``
    is always checked; code benchmarks' own ``isolation`` as well.
    """
    require_isolation(cfg.sandbox.isolation, "sandbox.isolation")
    for name, bench in benches.items():
        if (mode := bench.sandbox_isolation()) is not None:
            require_isolation(mode, f"benchmarks.{name}.isolation")
