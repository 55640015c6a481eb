"""Commands: ``rollback`` (one failed run) and ``rollback-experiment`` (every failed run of a sweep)."""

from __future__ import annotations

import argparse
import asyncio
import json


def _calibration(path: str | None):
    from attribution.conformal import load_calibration

    return load_calibration(path) if path else None


def _setup(args: argparse.Namespace, calibration, strategies: list[str]):
    """How to score the runs: the flags, defaulting to what the calibration records (None: no scoring)."""
    from attribution.rollback_experiment import resolve_scoring

    if all(s == "restart" for s in strategies):
        return None
    return resolve_scoring(calibration, scorer=args.scorer, train_dir=args.train_dir, model=args.model,
                           config=args.config, with_ground_truth=args.with_ground_truth,
                           uses_calibration="conformal" in strategies, seed=args.seed)


def cmd_rollback(args: argparse.Namespace) -> int:
    from attribution.loaders import load_run
    from attribution.rollback import rollback_one
    from attribution.rollback_experiment import early_stopped_choices, score_runs
    from descriptor.layout import RunPaths

    run = RunPaths.parse(args.run_dir)
    traj = load_run(run.task_dir, run.run_index)
    calibration = _calibration(args.calibration)
    setup = _setup(args, calibration, [args.strategy])
    early = asyncio.run(early_stopped_choices([traj], setup, calibration)) if args.strategy == "conformal" else None
    if early:
        (choice, nfe), = early
        rec = asyncio.run(rollback_one(traj, strategy=args.strategy, scores=None, calibration=calibration,
                                       scoring_nfe=nfe, choice=choice))
    else:
        scores = asyncio.run(score_runs([traj], setup))[0] if setup else None
        rec = asyncio.run(rollback_one(traj, strategy=args.strategy, scores=scores, calibration=calibration,
                                       scoring_nfe=(scores.nfe or 0) if scores else 0))
    print(json.dumps(rec.model_dump(mode="json"), indent=2))
    return 0


def cmd_rollback_experiment(args: argparse.Namespace) -> int:
    from attribution.rollback_experiment import rollback_experiment
    from mas.cli import print_table

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    calibration = _calibration(args.calibration)
    setup = _setup(args, calibration, strategies)
    summary = asyncio.run(rollback_experiment(
        args.experiment_root, calibration=calibration, strategies=strategies, setup=setup, out=args.out,
        concurrency=args.concurrency))
    rows = []
    for s in strategies:
        r = summary[s]
        rows.append({"strategy": s, "n": r["n"], "success_rate": r["success_rate"],
                     "coverage": r["coverage"] if r["coverage"] is not None else "-",
                     "cost": r["cost"], "tokens_mean": r["tokens_mean"]})
    print_table(rows, f"rollback ({setup.scorer if setup else 'no'} scorer)")
    print(f"wrote {args.out}/rollback_results.json")
    return 0


def _add_scoring(p: argparse.ArgumentParser) -> None:
    """Scorer options; each defaults to what the calibration recorded about its scores."""
    p.add_argument("--scorer", default=None,
                   help="step scorer (default: the calibration's scorer, else position); another scorer than "
                        "the calibration's is refused for strategy conformal")
    p.add_argument("--train-dir", help="failed runs to fit a trained scorer on (default: the data the "
                                       "calibration's scorer was trained on)")
    p.add_argument("--model", default=None,
                   help="model route of an LLM scorer (embedded, scripted, or a [models.NAME] of --config; "
                        "default: the calibration's route)")
    p.add_argument("--config", default=None, help="experiment TOML with the model routes (default: built-ins)")
    gt = p.add_mutually_exclusive_group()
    gt.add_argument("--with-ground-truth", dest="with_ground_truth", action="store_true",
                    help="the scorer may see the task's reference answer")
    gt.add_argument("--without-ground-truth", dest="with_ground_truth", action="store_false",
                    help="the scorer never sees the reference answer (default: a real failed run has none "
                         "to give the fixer)")
    p.set_defaults(with_ground_truth=False)
    p.add_argument("--seed", type=int, default=0, help="scorer seed (default 0)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollback", help="fork a failed run before its flagged steps and resume it")
    p.add_argument("--run-dir", required=True, help="the run: <task_dir>/run_<r> (or one of its files)")
    p.add_argument("--calibration", help="calibration.json from `calibrate` (strategy conformal)")
    p.add_argument("--strategy", choices=["conformal", "top1", "restart"], default="conformal")
    _add_scoring(p)
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser("rollback-experiment", help="roll back every failed run of a sweep with each strategy")
    p.add_argument("--experiment-root", required=True)
    p.add_argument("--calibration", help="calibration.json from `calibrate`")
    p.add_argument("--strategies", default="conformal,top1,restart")
    _add_scoring(p)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_rollback_experiment)
