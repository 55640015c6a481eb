"""Print the per-call cost of benchmark.sandbox against a bare interpreter start, per isolation mode.

``namespaces`` (the default) adds ``unshare``, the mounts of the isolated view and
one fork to every evaluation; ``unsafe-no-namespaces`` is the audit hook and
limits alone. Wall-clock figures (ms) depend on machine load; the CPU figures
(user+sys ms of the child processes, from getrusage) barely do, so compare
those on a busy box.

``--humaneval N`` times the evaluation of HumanEval's first N canonical solutions
three ways, interleaved task by task so that load changes hit all alike: as
the evaluator did before issue 30 (program and tests in one sandbox, an end
marker; the sandbox of commit ``BASELINE``, read with git), the same one-process
evaluation on today's sandbox, and today's evaluator (tests in a judge sandbox
calling the candidate's sandbox). It prints the per-task medians, the ratios
and the load average.

Run: python scripts/bench_sandbox.py [--calls N] [--humaneval N]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BASELINE = "0f5d10f"
"""The last commit whose code benchmarks ran the tests in the candidate's process."""

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


def _baseline_sandbox(tmp: Path) -> object:
    """benchmark/sandbox.py as of ``BASELINE`` (with its child program), imported under another name."""
    for name in ("sandbox.py", "sandbox_child.py"):
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{BASELINE}:benchmark/{name}"], check=True,
                              capture_output=True, text=True).stdout
        (tmp / name).write_text(text)
    spec = importlib.util.spec_from_file_location("baseline_sandbox", tmp / "sandbox.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["baseline_sandbox"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _one_process(run: Callable[..., object], task: object) -> bool:
    """The evaluation before the split: prompt, answer, tests and an end marker in one sandboxed program."""
    ref = task.reference  # type: ignore[attr-defined]
    marker = f"__TESTS_PASSED_{uuid.uuid4().hex}__"
    program = f"{ref['prompt']}{ref['canonical_solution']}\n\n{ref['test']}\n\ncheck({ref['entry_point']})\n" \
              f"print({marker!r})\n"
    res = run(program, timeout_s=10.0, memory_mb=512)
    return bool(res.ok and marker in res.stdout)  # type: ignore[attr-defined]


def bench_humaneval(n: int) -> None:
    from benchmark.registry import get_benchmark

    bench = get_benchmark("humaneval")
    tasks = bench.load_tasks(n)
    with tempfile.TemporaryDirectory() as tmp:
        old = _baseline_sandbox(Path(tmp))
        from benchmark.sandbox import run_python as today

        times: dict[str, list[float]] = {"before (one process, old sandbox)": [], "one process, today's sandbox": [],
                                         "today (judge + candidate)": []}
        cpu = dict.fromkeys(times, 0.0)
        ways = list(zip(times, (lambda t: _one_process(old.run_python, t), lambda t: _one_process(today, t),
                                lambda t: bench.evaluate(t, bench.reference_answer(t)).success)))
        load0 = os.getloadavg()
        for i, task in enumerate(tasks):
            for label, way in ways[i % 3:] + ways[:i % 3]:  # rotate the order too
                t, c = time.perf_counter(), _children_cpu_ms()
                ok = way(task)
                times[label].append((time.perf_counter() - t) * 1000.0)
                cpu[label] += _children_cpu_ms() - c
                if not ok:
                    print(f"  {task.task_id}: {label} did not pass")
    for label, walls in times.items():
        print(f"humaneval per task [{label}]: median {statistics.median(walls):6.1f} ms, "
              f"mean {statistics.fmean(walls):6.1f} ms, child CPU {cpu[label] / len(walls):6.1f} ms "
              f"over {len(walls)} tasks")
    labels = list(times)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"ratio today / before: {med[labels[2]] / med[labels[0]]:.2f} (medians); "
          f"judge+candidate / one process on today's sandbox: {med[labels[2]] / med[labels[1]]:.2f}")
    print(f"load average (1, 5, 15 min) at start {load0}, at end {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20, help="calls per measurement")
    parser.add_argument("--humaneval", type=int, default=0, metavar="N",
                        help="also time the evaluation of HumanEval's first N tasks, before and after the split")
    args = parser.parse_args()
    n = args.calls
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")
    if n > 0:
        bare = _measure(lambda: subprocess.run([sys.executable, "-I", "-B", "-c", "pass"], check=True), n)
        print(_row("bare `python -I -B -c pass`", *bare))
        for mode in ("unsafe-no-namespaces", "namespaces"):
            sync = _measure(lambda m=mode: run_python("pass", isolation=m), n)
            asy = _measure(lambda m=mode: asyncio.run(arun_python("pass", isolation=m)), n)
            numpy = _measure(lambda m=mode: run_python("import numpy", isolation=m), max(3, n // 4))
            print(_row(f"run_python('pass') [{mode}]", *sync))
            print(_row(f"arun_python('pass') [{mode}]", *asy))
            print(_row(f"run_python('import numpy') [{mode}]", *numpy))
            extra = statistics.median(sync[0]) - statistics.median(bare[0])
            print(f"{mode}: overhead over a bare start: wall {extra:+.1f} ms"
                  f" (median), child CPU {sync[1] - bare[1]:+.1f} ms per call")
    if args.humaneval:
        bench_humaneval(args.humaneval)


if __name__ == "__main__":
    main()
