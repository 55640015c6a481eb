"""Print the per-call cost of benchmark.sandbox against a bare interpreter start, per isolation mode.

``namespaces`` (the default) adds ``unshare``, the mounts of the isolated view and
one fork to every evaluation; ``unsafe-no-namespaces`` is the audit hook and
limits alone. Wall-clock figures (ms) depend on machine load; the CPU figures
(user+sys ms of the child processes, from getrusage) barely do, so compare
those on a busy box.

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark.sandbox import arun_python, run_python  # noqa: E402


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
    return f"{label:52s} wall median {statistics.median(walls):6.1f} ms  p90 {p90:6.1f} ms  child CPU {cpu:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20, help="calls per measurement")
    n = parser.parse_args().calls

    bare = _measure(lambda: subprocess.run([sys.executable, "-I", "-B", "-c", "pass"], check=True), n)
    print(_row("bare `python -I -B -c pass`", *bare))
    for mode in ("unsafe-no-namespaces", "namespaces"):
        sync = _measure(lambda m=mode: run_python("pass", isolation=m), n)
        asy = _measure(lambda m=mode: asyncio.run(arun_python("pass", isolation=m)), n)
        numpy = _measure(lambda m=mode: run_python("import numpy", isolation=m), max(3, n // 4))
        print(_row(f"run_python('pass') [{mode}]", *sync))
        print(_row(f"arun_python('pass') [{mode}]", *asy))
        print(_row(f"run_python('import numpy') [{mode}]", *numpy))
        print(f"{mode}: overhead over a bare start: wall {statistics.median(sync[0]) - statistics.median(bare[0]):+.1f} ms"
              f" (median), child CPU {sync[1] - bare[1]:+.1f} ms per call")


if __name__ == "__main__":
    main()
