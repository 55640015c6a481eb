"""Counterfactual labels of scripted failures per error position (issue 29's "What must show"), one command.

    python scripts/bench_labels.py [--scenarios left,mid,right,uniform] [--tasks 10] [--samples 1] [--keep DIR]

For each scenario: a sweep (``sas`` on arith with 10-20 operations, so runs have 11-21 steps; scripted model, one
injected error per run placed by ``--inject-position``), then ``label-failures`` on it. Per scenario and pooled:
the share of failures whose label equals the injected step (Wilson 95 % interval), the mean replays per failure
against the budget 2·log2(steps) + 2 (per failure and at the mean step count), the replays' mean tokens and the
labelling's wall time. Targets: label = injected step in >= 95 % of failures; mean replays <= 2·log2(steps) + 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import cli, work_dir  # noqa: E402
from descriptor.stats import wilson_interval  # noqa: E402

SCENARIOS = ("left", "mid", "right", "uniform")


def scenario(root: Path, name: str, args: argparse.Namespace) -> list[dict]:
    """The label lines of one scenario's sweep."""
    cli("run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
        "--inject-position", name, "--task-limit", str(args.tasks), "--seed", str(args.seed), "--output-root",
        str(root), "--experiment-id", name, "--progress", "none", "--set", "benchmarks.arith.min_ops=10",
        "--set", "benchmarks.arith.max_ops=20", "--set", "mas.max_tool_iterations=24")
    out = root / f"{name}.labels.jsonl"
    cli("label-failures", "--experiment-root", str(root / name), "--samples", str(args.samples), "--out", str(out))
    return [json.loads(line) for line in out.read_text().splitlines()]


def figures(labels: list[dict], wall_s: float) -> dict:
    n = len(labels)
    hits = sum(lab["decisive_step"] == lab["injected_step"] for lab in labels)
    steps = sum(lab["n_steps"] for lab in labels) / n
    replays = sum(lab["replays"] for lab in labels) / n
    budget = 2 * math.log2(steps) + 2
    within = sum(lab["replays"] <= 2 * math.log2(lab["n_steps"]) + 2 for lab in labels)
    lo, hi = wilson_interval(hits, n)
    return {"failures": n, "label_equals_injected": hits / n, "ci": (lo, hi), "mean_steps": steps,
            "mean_replays": replays, "budget_at_mean_steps": budget, "within_budget": within,
            "replays_per_step_count": replays / steps, "mean_tokens": sum(lab["tokens"] for lab in labels) / n,
            "wall_s": wall_s, "ok": hits / n >= 0.95 and replays <= budget}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--tasks", type=int, default=10, help="runs (one failure each) per scenario (default 10)")
    p.add_argument("--samples", type=int, default=1, help="replays per probed point (default 1: scripted)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", help="keep the sweeps in DIR (default: a temporary directory, removed)")
    args = p.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    rows, pooled = {}, []
    with work_dir(args.keep, "bench_labels_") as root:
        for name in args.scenarios.split(","):
            t0 = time.perf_counter()
            labels = scenario(root, name, args)
            rows[name] = figures(labels, time.perf_counter() - t0)
            pooled += labels
        rows["pooled"] = figures(pooled, sum(r["wall_s"] for r in rows.values()))
    print(f"{'scenario':9s} {'n':>3s} {'label=injected [95% CI]':>26s} {'steps':>6s} {'replays':>8s} "
          f"{'budget':>7s} {'within':>7s} {'tokens':>8s} {'wall s':>7s}  target")
    for name, r in rows.items():
        lo, hi = r["ci"]
        print(f"{name:9s} {r['failures']:3d} {r['label_equals_injected']:9.3f} [{lo:.2f}, {hi:.2f}]       "
              f"{r['mean_steps']:6.1f} {r['mean_replays']:8.2f} {r['budget_at_mean_steps']:7.2f} "
              f"{r['within_budget']:3d}/{r['failures']:<3d} {r['mean_tokens']:8.0f} {r['wall_s']:7.1f}  "
              f"{'met' if r['ok'] else 'MISSED'}")
    print(f"load average at end: {os.getloadavg()}")
    return 0 if rows["pooled"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
