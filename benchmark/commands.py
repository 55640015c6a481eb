"""The benchmark stage's commands (``--help``'s lines; their parsers are filled by :mod:`benchmark.cli`, imported
only when one of them runs)."""

from descriptor.commands import declare

declare("list-benchmarks", "list the benchmark adapters", "benchmark.cli:list_benchmarks_parser")
declare("benchmark-info", "describe one benchmark (success definition, licence, example)",
        "benchmark.cli:benchmark_info_parser")
declare("benchmark-check", "run every task's reference solution and an empty answer through the evaluation",
        "benchmark.cli:benchmark_check_parser")
