"""Benchmark adapters as runs use them: names (an Inspect task, a dataset of the config), options with the sandbox's
isolation default, and the isolation check."""

from __future__ import annotations

from typing import Any

from benchmark.base import Benchmark
from benchmark.registry import ADAPTER_KEY, BENCHMARKS, get_benchmark, spec_benchmark
from benchmark.sandbox import require_isolation
from descriptor.errors import UserError
from mas.config import ExperimentConfig


def resolve_benchmarks(cfg: ExperimentConfig, given: list[str]) -> tuple[ExperimentConfig, list[str]]:
    """The config and benchmark names a sweep of ``given`` runs: an ``inspect:...`` benchmark gets its name
    (``inspect-<task>``) and its options in ``[benchmarks.<name>]`` (the user's there, ``grader`` say, kept), so
    the runs' recorded config rebuilds it (a resume, a rollback, a worker process)."""
    names, tables = [], dict(cfg.benchmarks)
    for spec in given:
        found = spec_benchmark(spec)
        if found is None:
            names.append(spec)
            continue
        name, options = found
        table = dict(tables.get(name) or {})
        for key, value in options.items():
            if table.setdefault(key, value) != value:
                raise UserError(f"--benchmark {spec}: [benchmarks.{name}] says {key} = {table[key]!r}; one name, "
                                f"one benchmark (give the other task its own [benchmarks.NAME] with {key})")
        tables[name] = table
        names.append(name)
    names = list(dict.fromkeys(names))
    for name in names:
        if name in cfg.datasets and (name in BENCHMARKS or name in tables):
            other = "a built-in benchmark" if name in BENCHMARKS else f"[benchmarks.{name}]"
            raise UserError(f"datasets.{name}: {other} has this name too; give the dataset another name")
    return (cfg if tables == cfg.benchmarks else cfg.model_copy(update={"benchmarks": tables})), names


def benchmark_options(cfg: ExperimentConfig, name: str) -> dict[str, Any]:
    """``[benchmarks.<name>]``, with ``isolation`` defaulting to ``sandbox.isolation`` for adapters that run code;
    a ``[datasets.<name>]`` as the dataset adapter's options.

    One setting decides how model-written code is isolated, whether an agent
    runs it (the python tool) or the benchmark does (evaluation).
    """
    if name in cfg.datasets:
        return {ADAPTER_KEY: "dataset", **cfg.datasets[name].model_dump(exclude_none=True)}
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
