"""What the package-ownership check (descriptor/ownership.py) costs at import, printed by one command.

    python scripts/bench_import.py [--repeat 200] [--python PATH]

Prints the median wall time of ``check_packages()`` with its caches cleared (the once-per-process cost), run by
this interpreter on this checkout, and by ``--python`` (e.g. the venv scripts/check_wheel.sh builds with
KEEP=1, where the check reads the installed RECORD and hashes four files instead of reading pyproject.toml),
next to the time of ``import descriptor`` in that process for scale, and the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = r"""
import statistics, sys, time
t = time.perf_counter()
import descriptor
t_import = time.perf_counter() - t
from descriptor import ownership
runs = []
for _ in range(int(sys.argv[1])):
    ownership.check_packages.cache_clear(); ownership._checkout.cache_clear(); ownership._record.cache_clear()
    t = time.perf_counter(); ownership.check_packages(); runs.append(time.perf_counter() - t)
print(f"{statistics.median(runs) * 1e3:.3f} {t_import * 1e3:.1f} {descriptor.__file__}")
"""


def measure(python: str, repeat: int) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} if python != sys.executable else os.environ
    out = subprocess.run([python, "-c", CHILD, str(repeat)], capture_output=True, text=True, check=True, env=env,
                         cwd="/" if python != sys.executable else None).stdout.split()
    return f"check_packages {out[0]} ms (median of {repeat}); import descriptor {out[1]} ms; from {out[2]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--python", help="another interpreter (an installed wheel's venv)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}")
    print("this checkout:", measure(sys.executable, args.repeat))
    if args.python:
        print("--python:     ", measure(args.python, args.repeat))


if __name__ == "__main__":
    main()
