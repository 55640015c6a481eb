"""What reading the registries' entry points costs a command: one scan per group against one cached scan.

A command reads up to seven registries (benchmarks, systems, methods, scorers, conformal methods, sweep hooks,
trace processors); each first read looks up its entry-point group among the installed distributions.

    python scripts/bench_registry.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from descriptor.registry import _installed_entry_points  # noqa: E402

GROUPS = ("benchmarks", "systems", "methods", "scorers", "conformal", "sweep_hooks", "trace_processors")


def per_group() -> None:
    for g in GROUPS:
        list(metadata.entry_points(group=f"mas_econ.{g}"))


def cached() -> None:
    _installed_entry_points.cache_clear()
    for g in GROUPS:
        list(_installed_entry_points(tuple(sys.path)).select(group=f"mas_econ.{g}"))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    rounds = p.parse_args().rounds
    times: dict[str, list[float]] = {"per_group": [], "cached": []}
    for _ in range(rounds):  # interleaved, so a change of machine load hits both alike
        for name, fn in (("per_group", per_group), ("cached", cached)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"distributions: {len(list(metadata.distributions()))}, groups: {len(GROUPS)}, rounds: {rounds}")
    for k, v in med.items():
        print(f"{k}: {v:.1f} ms (median)")
    print(f"ratio per_group / cached: {med['per_group'] / med['cached']:.2f}; load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
