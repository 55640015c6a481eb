"""Benchmark adapters with native evaluation on data that works offline."""

from descriptor.exports import lazy_exports
from descriptor.ownership import check_packages

check_packages()  # another distribution's top-level package of the same name: a clear ImportError

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
