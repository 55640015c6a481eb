"""Print the per-call overhead of mas.sandbox against a bare interpreter start (ms).

Run: python scripts/bench_sandbox.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

from mas.sandbox import arun_python, run_python


def _ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples):6.1f} ms  p90 {sorted(samples)[int(0.9 * (len(samples) - 1))]:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20, help="calls per measurement")
    n = parser.parse_args().calls

    bare = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-B", "-c", "pass"], check=True)
        bare.append((time.perf_counter() - t) * 1000)
    sync = [run_python("pass").duration_ms for _ in range(n)]
    wall = []
    for _ in range(n):
        t = time.perf_counter()
        run_python("pass")
        wall.append((time.perf_counter() - t) * 1000)

    async def _async() -> list[float]:
        return [(await arun_python("pass")).duration_ms for _ in range(n)]

    asy = asyncio.run(_async())
    numpy = [run_python("import numpy").duration_ms for _ in range(max(3, n // 4))]
    print(f"bare `python -I -B -c pass`          {_ms(bare)}")
    print(f"run_python('pass') child lifetime    {_ms(sync)}")
    print(f"run_python('pass') wall incl. setup  {_ms(wall)}")
    print(f"arun_python('pass') child lifetime   {_ms(asy)}")
    print(f"run_python('import numpy')           {_ms(numpy)}")
    print(f"sandbox overhead over bare start     {statistics.median(wall) - statistics.median(bare):6.1f} ms (median)")


if __name__ == "__main__":
    main()
