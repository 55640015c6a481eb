"""Rollback figures with the scripted model, printed by one command.

    python scripts/bench_rollback.py [--cal-tasks 60] [--test-tasks 60] [--scorer learned] [--methods vcp,lf,rf,twf,auto]

The whole loop on the project's own traces, as a user runs it: a calibration
sweep with one injected error per run (``--inject-errors 1.0``), its failed
runs scored (``score-steps --runs-dir``) and calibrated at ``--alpha`` with
each conformal method; a test sweep with another seed (other tasks) rolled
back (``rollback-experiment``) from each method's sets, from the top-1 step
and from the start. Prints per strategy the success rate, the coverage
of the decisive (injected) step, and the mean cost (fraction of the original
steps redone; restart = 1.0), and the **oracle cost**: restarting exactly at
each run's injected step, the least any strategy that restores success can
redo. Targets (issue 8): success >= 0.95 at cost <= 0.5, coverage >= 1 - alpha.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attribution.conformal import METHODS
from main import main as cli


def _cli(*args: str) -> None:
    if cli(list(args)) != 0:
        raise SystemExit(f"command failed: main.py {' '.join(args)}")


def _sweep(root: Path, name: str, *, seed: int, tasks: int, benchmark: str, system: str) -> Path:
    _cli("run", "--benchmark", benchmark, "--systems", system, "--model", "scripted", "--inject-errors", "1.0",
         "--task-limit", str(tasks), "--seed", str(seed), "--output-root", str(root), "--experiment-id", name,
         "--progress", "none")
    return root / name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cal-tasks", type=int, default=60)
    ap.add_argument("--test-tasks", type=int, default=60)
    ap.add_argument("--benchmark", default="arith")
    ap.add_argument("--system", default="sas")
    ap.add_argument("--scorer", default="learned")
    ap.add_argument("--methods", default="vcp,lf,rf,twf,auto", help="conformal methods to calibrate, comma-separated")
    ap.add_argument("--alpha", type=float, default=0.2)
    ap.add_argument("--keep", type=Path, help="write the sweeps and results here instead of a temp dir")
    args = ap.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if unknown := [m for m in methods if m not in METHODS]:
        ap.error(f"--methods: unknown {', '.join(unknown)} (expected some of {', '.join(METHODS)})")

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_rollback_"))
    try:
        _bench(args, methods, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _bench(args: argparse.Namespace, methods: list[str], root: Path) -> None:
    cal_root = _sweep(root, "cal", seed=0, tasks=args.cal_tasks, benchmark=args.benchmark, system=args.system)
    scores = root / "cal.scores.jsonl"
    _cli("score-steps", "--runs-dir", str(cal_root), "--scorer", args.scorer, "--out", str(scores))
    test_root = _sweep(root, "test", seed=1, tasks=args.test_tasks, benchmark=args.benchmark, system=args.system)
    rows: dict[str, dict] = {}
    for i, method in enumerate(methods):
        cal = root / f"calibration.{method}.json"
        _cli("calibrate", "--scores", str(scores), "--method", method, "--alpha", str(args.alpha), "--out", str(cal))
        out = root / f"rollback.{method}"
        strategies = "conformal,top1,restart" if i == 0 else "conformal"  # top1 and restart do not use the set
        _cli("rollback-experiment", "--experiment-root", str(test_root), "--calibration", str(cal),
             "--strategies", strategies, "--out", str(out))
        results = json.loads((out / "rollback_results.json").read_text(encoding="utf-8"))
        rows[f"conformal {method}"] = results["conformal"]
        if i == 0:
            rows["top1"], rows["restart"] = results["top1"], results["restart"]

    runs = rows["restart"]["runs"]
    known = [r for r in runs if r["decisive_step"] is not None]
    print(f"\n{args.system} on {args.benchmark}, scripted model, one injected error per run; scorer {args.scorer}, "
          f"alpha {args.alpha}; {len(runs)} failed test runs")
    print(f"{'strategy':16s} {'success':>8s} {'coverage':>9s} {'cost':>6s}")
    for name, r in rows.items():
        cov = "-" if r.get("coverage") is None else f"{r['coverage']:.3f}"
        print(f"{name:16s} {r['success_rate']:8.3f} {cov:>9s} {r['cost']:6.3f}")
    if known:
        oracle = statistics.fmean((r["n_steps"] - r["decisive_step"]) / r["n_steps"] for r in known)
        position = statistics.fmean(r["decisive_step"] / r["n_steps"] for r in known)
        print(f"{'oracle':16s} {1:8.3f} {1:9.3f} {oracle:6.3f}   (restart exactly at the injected step)")
        print(f"mean injected position k/n = {position:.3f}: a strategy that restores every run redoes at least "
              "the oracle cost")
    if args.keep:
        print(f"\nfiles: {root}")


if __name__ == "__main__":
    sys.exit(main())
