"""What start-up costs: the package-ownership check (descriptor/ownership.py) at import and, with ``--commands``,
a command's start-up as a fresh process, printed by one command.

    python scripts/bench_import.py [--repeat 200] [--python PATH] [--commands N [--against DIR]]

Prints the median wall time of ``check_packages()`` with its caches cleared (the once-per-process cost), run by
this interpreter on this checkout, and by ``--python`` (e.g. the venv scripts/check_wheel.sh builds with
KEEP=1, where the check reads the installed RECORD and hashes four files instead of reading pyproject.toml),
next to the time of ``import descriptor`` in that process for scale, and the load average.

``--commands N``: each of :data:`COMMANDS` run N times as ``python main.py ...`` from this checkout, the median
wall time and CPU time (user + system of the process, ms) of each; the target is at most 1 s of CPU for every
command's start-up. ``--against DIR``: the same from another checkout (``git archive main | tar -x -C DIR``), the
two interleaved run by run so that both see the same load, with the ratio this / other of the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = (
    ("--help",),
    ("run", "--help"),
    ("summarize-experiment", "--experiment-root", "{missing}"),
    ("plan", "--baseline-rate", "0.5", "--effect", "0.1"),
    ("conformal", "--help"),
    ("attribute", "--help"),
)
"""Start-ups that do no work after parsing (a help text, a plan, a missing experiment root: exit 2)."""

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


def start_up(checkout: Path, argv: tuple[str, ...]) -> tuple[float, float]:
    """Wall and CPU time (ms) of one ``python main.py ARGV`` from ``checkout`` (its code first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, str(checkout / "main.py"), *argv], cwd=checkout, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1e3, cpu * 1e3


def commands(repeat: int, against: Path | None) -> None:
    checkouts = [ROOT, *([against.resolve()] if against else [])]
    with tempfile.TemporaryDirectory() as tmp:
        for argv in COMMANDS:
            argv = tuple(a.format(missing=Path(tmp) / "missing") for a in argv)
            times: dict[Path, list[tuple[float, float]]] = {c: [] for c in checkouts}
            for _ in range(repeat):
                for checkout in checkouts:
                    times[checkout].append(start_up(checkout, argv))
            medians = {c: (statistics.median(w for w, _ in ts), statistics.median(u for _, u in ts))
                       for c, ts in times.items()}
            wall, cpu = medians[ROOT]
            line = f"{' '.join(argv)[:40]:40s} wall {wall:6.0f} ms  cpu {cpu:6.0f} ms"
            if against:
                o_wall, o_cpu = medians[against.resolve()]
                line += f"   other: wall {o_wall:6.0f} ms  cpu {o_cpu:6.0f} ms   ratio cpu {cpu / o_cpu:.2f}"
            print(line + f"  (median of {repeat})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--python", help="another interpreter (an installed wheel's venv)")
    ap.add_argument("--commands", type=int, default=0, metavar="N", help="also time each command's start-up N times")
    ap.add_argument("--against", type=Path, metavar="DIR", help="with --commands: another checkout, timed alike")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}")
    print("this checkout:", measure(sys.executable, args.repeat))
    if args.python:
        print("--python:     ", measure(args.python, args.repeat))
    if args.commands:
        commands(args.commands, args.against)
        print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
