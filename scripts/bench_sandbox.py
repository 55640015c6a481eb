"""Print the per-call cost of benchmark.sandbox against a bare interpreter start.

Wall-clock figures (ms) depend on machine load; the CPU figures (user+sys ms of
the child processes, from getrusage) barely do, so compare those on a busy box.

Run: python scripts/bench_sandbox.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from benchmark.sandbox import arun_python, run_python


def _children_cpu_ms() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1000.0


def _measure(fn: Callable[[], object], calls: int) -> tuple[list[float], float]:
    """(wall ms per call, mean child CPU ms per call)."""
    walls, cpu0 = [], _children_cpu_ms()
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        walls.append((time.perf_counter() - t) * 1000.0)
    return walls, (_children_cpu_ms() - cpu0) / calls


def _row(label: str, walls: list[float], cpu: float) -> str:
    p90 = sorted(walls)[int(0.9 * (len(walls) - 1))]
    return f"{label:34s} wall median {statistics.median(walls):6.1f} ms  p90 {p90:6.1f} ms  child CPU {cpu:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20, help="calls per measurement")
    n = parser.parse_args().calls

    bare = _measure(lambda: subprocess.run([sys.executable, "-I", "-B", "-c", "pass"], check=True), n)
    sync = _measure(lambda: run_python("pass"), n)
    asy = _measure(lambda: asyncio.run(arun_python("pass")), n)
    numpy = _measure(lambda: run_python("import numpy"), max(3, n // 4))
    print(_row("bare `python -I -B -c pass`", *bare))
    print(_row("run_python('pass')", *sync))
    print(_row("arun_python('pass') (+asyncio.run)", *asy))
    print(_row("run_python('import numpy')", *numpy))
    print(f"sandbox overhead over a bare start: wall {statistics.median(sync[0]) - statistics.median(bare[0]):+.1f} ms"
          f" (median), child CPU {sync[1] - bare[1]:+.1f} ms per call")


if __name__ == "__main__":
    main()
