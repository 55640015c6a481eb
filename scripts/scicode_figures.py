"""SciCode figures of an experiment: sub-step and main-problem success per system, with Wilson intervals, and tokens.

Reads ``<experiment>/scicode/<system>/<task>/run_<r>.result.json``. A sub-step counts once per run; a problem
counts for a system only when every one of its sub-steps has a finished run there (a sweep stopped early leaves
problems partly run; they are named, not counted), and is solved in run r when all its sub-steps passed in run r
(:mod:`descriptor.problems`, the rule of the summaries' ``problem_success_rate``); its (problem, run) pairs are
pooled for the interval.

    python scripts/scicode_figures.py artifacts/<experiment-id> [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmark.registry import get_benchmark
from descriptor.problems import problem_outcomes
from descriptor.stats import wilson_interval


def _rate(k: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(k, n) if n else (0.0, 0.0)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None, "wilson95": [round(low, 4), round(high, 4)]}


def figures(experiment: Path, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per system: ``sub_steps``, ``problems`` (rates with Wilson 95 % intervals), ``tokens_per_run``, and
    ``problems_partial`` (problems with some sub-steps not run)."""
    tasks = {t.task_id: t for t in get_benchmark("scicode", options).load_tasks()}
    per_problem: dict[str, int] = defaultdict(int)
    for task in tasks.values():
        per_problem[str(task.metadata["problem"])] += 1
    out: dict[str, Any] = {}
    for system_dir in sorted(p for p in (experiment / "scicode").iterdir() if p.is_dir()):
        runs = [json.loads(p.read_text()) for p in sorted(system_dir.glob("*/run_*.result.json"))]
        runs = [r for r in runs if r.get("status") == "finished" and r["task_id"] in tasks]
        if not runs:
            continue
        by_task: dict[str, dict[str, bool]] = defaultdict(dict)
        for r in runs:
            by_task[r["task_id"]][str(r["run_index"])] = bool(r["success"])
        problem = {t: str(tasks[t].metadata["problem"]) for t in by_task}
        outcomes = problem_outcomes([{"task_id": t, "problem": problem[t], "problem_tasks": per_problem[problem[t]],
                                      "run_success": ok} for t, ok in by_task.items()])
        complete = [o for o in outcomes.values() if o.complete]
        out[system_dir.name] = {
            "sub_steps": _rate(sum(bool(r["success"]) for r in runs), len(runs)),
            "problems": _rate(sum(o.solved for o in complete), sum(o.runs for o in complete)),
            "problems_solved": sorted((o.problem for o in complete if o.solved), key=int),
            "problems_partial": sorted((o.problem for o in outcomes.values() if not o.complete), key=int),
            "tokens_per_run": round(sum(r["tokens_total"] for r in runs) / len(runs), 1),
            "tokens_total": sum(r["tokens_total"] for r in runs),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", type=Path, help="the experiment directory (holding scicode/)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (args.experiment / "scicode").is_dir():
        print(f"{args.experiment}: no scicode/ directory (not an experiment that ran scicode)", file=sys.stderr)
        return 2
    result = figures(args.experiment)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for system, f in result.items():
        s, p = f["sub_steps"], f["problems"]
        print(f"{system}: sub-steps {s['k']}/{s['n']} = {s['rate']} [{s['wilson95'][0]}, {s['wilson95'][1]}]; "
              f"problem-runs {p['k']}/{p['n']} = {p['rate']} [{p['wilson95'][0]}, {p['wilson95'][1]}] "
              f"(partly run: {', '.join(f['problems_partial']) or 'none'}); tokens/run {f['tokens_per_run']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
