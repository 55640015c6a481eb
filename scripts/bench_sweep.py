"""Sweep efficiency: how well a sweep keeps C model slots busy.

The scripted model sleeps ``--latency-ms`` per call (asyncio.sleep, like a
remote endpoint), so an ideal sweep takes ``ideal_s = calls x latency / C``
seconds. ``efficiency = ideal_s / actual_s`` (target >= 0.90 at C = 16 and
200 runs). ``calls`` is counted from the traces the sweep wrote (events
backed by an LLM call). The process CPU time per run is printed too: on a
busy machine the event loop's own CPU work is what eats the slots.

Run: python scripts/bench_sweep.py [--runs 200] [--concurrency 16] [--latency-ms 200] [--system sas]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from descriptor.schema import read_trace  # noqa: E402
from mas.config import ExperimentConfig, ModelRoute  # noqa: E402
from mas.experiment import ExperimentRequest, run_experiment  # noqa: E402

TARGET = 0.90


def count_llm_calls(root: Path) -> int:
    """Trace events backed by an LLM call (they carry ``usage_source``), plus failed attempts."""
    n = 0
    for path in root.rglob("*.trace.jsonl"):
        for e in read_trace(path):
            extra = e.model_extra or {}
            n += "usage_source" in extra or (e.event_type == "error" and e.payload.get("kind") == "llm_call")
    return n


def measure(*, runs: int, concurrency: int, latency_ms: float, system: str, executor: str = "local",
            workdir: Path | None = None) -> dict[str, float]:
    """Run one sweep of ``runs`` arith runs and return its figures (seconds, ms, ratio)."""
    tmp = Path(workdir or tempfile.mkdtemp(prefix="bench_sweep_"))
    tasks = max(1, (runs + 1) // 2)
    cfg = ExperimentConfig(
        output_root=str(tmp), concurrency=concurrency, benchmarks={"arith": {"count": tasks}},
        models={"default": ModelRoute(provider="scripted", model="scripted", scripted_latency_ms=latency_ms)})
    # Warm imports and lazy caches outside the timed sweep.
    asyncio.run(run_experiment(ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=[system], task_limit=1,
                                                 runs_per_task=1, experiment_id="warmup", progress="none")))
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=[system], task_limit=tasks,
                            runs_per_task=2 if runs > 1 else 1, experiment_id="sweep", progress="none",
                            executor=executor)
    cpu0, t0 = time.process_time(), time.perf_counter()
    results = asyncio.run(run_experiment(req))
    actual_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    calls = count_llm_calls(tmp / "sweep")
    ideal_s = calls * latency_ms / 1000 / concurrency
    if workdir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"runs": len(results), "calls": calls, "ideal_s": ideal_s, "actual_s": actual_s,
            "efficiency": ideal_s / actual_s, "cpu_ms_per_run": cpu_s * 1000 / len(results),
            "failed_runs": sum(r.error is not None for r in results)}


def report(fig: dict[str, float], *, concurrency: int, latency_ms: float, system: str) -> str:
    verdict = "ok" if fig["efficiency"] >= TARGET else f"BELOW target {TARGET:.2f}"
    return (f"sweep efficiency ({system}, {fig['runs']} runs, C={concurrency}, {latency_ms:.0f} ms/call): "
            f"{fig['calls']} calls, ideal {fig['ideal_s']:.2f} s, actual {fig['actual_s']:.2f} s, "
            f"efficiency {fig['efficiency']:.3f} [{verdict}]; process CPU {fig['cpu_ms_per_run']:.1f} ms/run, "
            f"load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--system", default="sas")
    p.add_argument("--executor", choices=("local", "dask"), default="local")
    args = p.parse_args(argv)
    fig = measure(runs=args.runs, concurrency=args.concurrency, latency_ms=args.latency_ms, system=args.system,
                  executor=args.executor)
    print(report(fig, concurrency=args.concurrency, latency_ms=args.latency_ms, system=args.system))
    return 0


if __name__ == "__main__":
    sys.exit(main())
