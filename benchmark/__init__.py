"""Benchmark adapters with native evaluation on data that works offline."""

from descriptor.exports import lazy_exports

_EXPORTS = {
    "BENCHMARKS": "benchmark.registry",
    "Benchmark": "benchmark.base",
    "Environment": "benchmark.environment",
    "Evaluation": "benchmark.base",
    "Task": "benchmark.base",
    "get_benchmark": "benchmark.registry",
    "list_benchmarks": "benchmark.registry",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
