"""Commands: ``rollback`` (one failed run) and ``rollback-experiment`` (every failed run of a sweep)."""

from __future__ import annotations

import argparse
import asyncio
import json


def _calibration(path: str | None):
    from attribution.conformal import load_calibration

    return load_calibration(path) if path else None


def cmd_rollback(args: argparse.Namespace) -> int:
    from attribution.loaders import load_run, load_runs_dir
    from attribution.rollback import _run_paths, rollback_one
    from attribution.rollback_experiment import score_runs

    task_dir, r = _run_paths(args.run_dir)
    traj = load_run(task_dir, r)
    train = load_runs_dir(args.train_dir).trajectories if args.train_dir else []
    scores = None
    if args.strategy != "restart":
        scores = asyncio.run(score_runs([traj], args.scorer, train=[t for t in train if t.id != traj.id]))[0]
    rec = asyncio.run(rollback_one(traj, strategy=args.strategy, scores=scores,
                                   calibration=_calibration(args.calibration), scoring_nfe=(scores.nfe or 0) if scores else 0))
    print(json.dumps(rec.model_dump(mode="json"), indent=2))
    return 0


def cmd_rollback_experiment(args: argparse.Namespace) -> int:
    from attribution.rollback_experiment import rollback_experiment
    from mas.cli import print_table

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    summary = asyncio.run(rollback_experiment(
        args.experiment_root, calibration=_calibration(args.calibration), strategies=strategies,
        scorer=args.scorer, train_dir=args.train_dir, out=args.out, concurrency=args.concurrency))
    rows = []
    for s in strategies:
        r = summary[s]
        rows.append({"strategy": s, "n": r["n"], "success_rate": r["success_rate"],
                     "coverage": r["coverage"] if r["coverage"] is not None else "-",
                     "cost": r["cost"], "tokens_mean": r["tokens_mean"]})
    print_table(rows, f"rollback ({args.scorer} scorer)")
    print(f"wrote {args.out}/rollback_results.json")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollback", help="fork a failed run before its flagged steps and resume it")
    p.add_argument("--run-dir", required=True, help="the run: <task_dir>/run_<r> (or one of its files)")
    p.add_argument("--calibration", help="calibration.json from `calibrate` (strategy conformal)")
    p.add_argument("--strategy", choices=["conformal", "top1", "restart"], default="conformal")
    p.add_argument("--scorer", default="position", help="step scorer (default: position)")
    p.add_argument("--train-dir", help="failed runs to fit a trained scorer on (e.g. the calibration sweep)")
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser("rollback-experiment", help="roll back every failed run of a sweep with each strategy")
    p.add_argument("--experiment-root", required=True)
    p.add_argument("--calibration", help="calibration.json from `calibrate`")
    p.add_argument("--strategies", default="conformal,top1,restart")
    p.add_argument("--scorer", default="position")
    p.add_argument("--train-dir", help="failed runs to fit a trained scorer on (e.g. the calibration sweep)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_rollback_experiment)
