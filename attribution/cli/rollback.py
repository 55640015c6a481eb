"""Commands: ``rollback`` (one failed run), ``rollback-experiment`` (every failed run of a sweep) and
``label-failures`` (their decisive steps by replay)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from descriptor.cliargs import positive_int
from descriptor.records import ROLLBACK_STRATEGIES
from descriptor.redact import redact


def _prepared(args: argparse.Namespace, strategies: list[str]):
    """``(calibration, scoring setup)`` of the flags; then a warning when the calibration's replay labels were made
    the other way about the note than these rollbacks (for a strategy that scores the run, as the labels trained
    its scorer), printed once nothing can refuse the command any more."""
    from attribution.conformal import load_calibration
    from attribution.rollback.restart import UNSCORED
    from attribution.sources.labelfile import note_mismatch

    calibration = load_calibration(args.calibration) if args.calibration else None
    setup = _setup(args, calibration, strategies)
    scored = any(s not in UNSCORED for s in strategies)
    said = note_mismatch(calibration.label_files, args.note) if calibration is not None and scored else None
    if said:
        print(f"warning: {said}", file=sys.stderr)
    return calibration, setup


def _setup(args: argparse.Namespace, calibration, strategies: list[str]):
    """How to score the runs: the flags, defaulting to what the calibration records (None: no scoring)."""
    from attribution.rollback.restart import UNSCORED
    from attribution.rollback.experiment import resolve_scoring

    if all(s in UNSCORED for s in strategies):
        return None
    return resolve_scoring(calibration, scorer=args.scorer, train_dir=args.train_dir, model=args.model,
                           config=args.config, with_ground_truth=args.with_ground_truth,
                           uses_calibration="conformal" in strategies, seed=args.seed)


def _rollbackable(run_dir: str, *, force: bool):
    """The run at ``run_dir`` as a trajectory, after the guards: it exists, it finished and it failed."""
    from attribution.sources.loaders import MalformedFile, load_run
    from descriptor.errors import UserError
    from pathlib import Path

    from descriptor.layout import RunPaths
    from descriptor.run_files import RunFileError, read_result

    run = RunPaths.parse(Path(run_dir).resolve())  # its record names the run by path, readable from anywhere
    if not run.result.is_file():
        raise UserError(f"--run-dir {run.prefix}: no {run.result.name}: the run does not exist or never finished")
    try:
        result = read_result(run)
    except RunFileError as err:
        raise UserError(str(err)) from None
    if result.status == "error" and not force:
        raise UserError(f"--run-dir {run.prefix}: the run ended in an infrastructure error ({(result.error or '')[:200]}), "
                        "not a task failure: run its sweep again to retry it (or pass --force)")
    if result.success and not force:
        raise UserError(f"--run-dir {run.prefix}: the run succeeded; rolling it back would spend tokens redoing a "
                        "correct answer (pass --force to do it anyway)")
    try:
        return load_run(run.task_dir, run.run_index)
    except MalformedFile as err:
        raise UserError(str(err)) from None


def cmd_rollback(args: argparse.Namespace) -> int:
    from attribution.rollback.restart import rollback_one
    from attribution.rollback.experiment import early_stopped_choices, score_runs

    traj = _rollbackable(args.run_dir, force=args.force)
    calibration, setup = _prepared(args, [args.strategy])
    early = asyncio.run(early_stopped_choices([traj], setup, calibration)) if args.strategy == "conformal" else None
    if early:
        (choice, nfe), = early
        rec = asyncio.run(rollback_one(traj, strategy=args.strategy, scores=None, calibration=calibration,
                                       scoring_nfe=nfe, choice=choice, note=args.note))
    else:
        scores = asyncio.run(score_runs([traj], setup))[0] if setup else None
        rec = asyncio.run(rollback_one(traj, strategy=args.strategy, scores=scores, calibration=calibration,
                                       scoring_nfe=(scores.nfe or 0) if scores else 0, note=args.note))
    print(redact(json.dumps(rec.model_dump(mode="json"), indent=2)))
    if rec.status == "error":
        print(redact(f"error: the rollback of {rec.run} ended in an error ({(rec.error or '')[:300]}); it is no "
                     "outcome"), file=sys.stderr)
        return 1
    return 0


def _with_ci(value: float | None, ci: tuple[float | None, float | None] | list[float | None]) -> str:
    """``0.917 [0.82, 0.96]``; ``-`` when there is no value."""
    if value is None:
        return "-"
    lo, hi = ci
    return f"{value:.3f}" if lo is None or hi is None else f"{value:.3f} [{lo:.2f}, {hi:.2f}]"


def single_step_note(runs: list[dict], strategies: list[str]) -> str | None:
    """A note when some failed runs took one step: every strategy restarts those from step 0 at the same cost, so
    on them the strategies differ only by chance (a ``sas`` run that answered without a tool call)."""
    single = sum(run["n_steps"] == 1 for run in runs)
    if not single or len(strategies) < 2:
        return None
    return (f"note: {single} of {len(runs)} failed run(s) took a single step: every strategy restarts "
            f"{'it' if single == 1 else 'them'} from step 0 at the same cost, so on "
            f"{'it' if single == 1 else 'them'} the strategies differ only by chance")


def cmd_rollback_experiment(args: argparse.Namespace) -> int:
    from attribution.rollback.experiment import check_strategies, rollback_experiment
    from descriptor.console_table import print_table

    from attribution.rollback.progress import ROLLBACK_OUT
    from descriptor.outputs import check_output

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    check_strategies(strategies)
    check_output(args.out, ROLLBACK_OUT, inputs=[args.experiment_root, args.calibration,
                                                 getattr(args, "train_dir", None), args.config])
    calibration, setup = _prepared(args, strategies)
    summary = asyncio.run(rollback_experiment(
        args.experiment_root, calibration=calibration, strategies=strategies, setup=setup, out=args.out,
        concurrency=args.concurrency, note=args.note))
    rows = []
    for s in strategies:
        r = summary[s]
        rows.append({"strategy": s, "n": r["n"], "errors": r["errors"],
                     "success": _with_ci(r["success_rate"], r["success_rate_ci"]),
                     "coverage": _with_ci(r["coverage"], r["coverage_ci"]),
                     "cost": _with_ci(r["cost"], r["cost_ci"]),
                     "tokens_mean": r["tokens_mean"] if r["tokens_mean"] is not None else "-"})
    print_table(rows, f"rollback ({setup.scorer if setup else 'no'} scorer)")
    if said := single_step_note(max((summary[s]["runs"] for s in strategies), key=len), strategies):
        print(said)
    print(f"wrote {args.out}/rollback_results.json")
    errors = sum(summary[s]["errors"] for s in strategies)
    if errors:
        first = next(run for s in strategies for run in summary[s]["runs"] if run["status"] == "error")
        print(redact(f"error: {errors} rollback(s) ended in an error, not counted as failed rollbacks (first: "
                     f"{first['run']}: {(first['error'] or '')[:300]})"), file=sys.stderr)
        return 1
    return 0


def cmd_label_failures(args: argparse.Namespace) -> int:
    from attribution.rollback.labels import LABELS_FILE, label_failures
    from descriptor.outputs import check_output
    from descriptor.console_table import print_table

    check_output(args.out, LABELS_FILE, inputs=[args.experiment_root])  # before the replays, which cost
    labels = asyncio.run(label_failures(args.experiment_root, samples=args.samples, out=args.out,
                                        concurrency=args.concurrency, note=args.note))
    done = [lab for lab in labels if lab.status == "labelled"]
    known = [lab for lab in done if lab.injected_step is not None]
    row = {"failed": len(labels), "labelled": len(done),
           "unrepairable": sum(lab.status == "unrepairable" for lab in labels),
           "errors": sum(lab.status == "error" for lab in labels),
           "replays_mean": f"{sum(lab.replays for lab in labels) / len(labels):.2f}",
           "tokens_mean": f"{sum(lab.tokens for lab in labels) / len(labels):.0f}"}
    if known:  # scripted runs with an injected error: how often the replay finds it
        row["equals_injected"] = f"{sum(lab.decisive_step == lab.injected_step for lab in known)}/{len(known)}"
    print_table([row], "label-failures")
    print(f"wrote {args.out}")
    return 0


def _add_note(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-note", dest="note", action="store_false",
                   help="tell the resumed agents nothing of the failure (the rollback note otherwise quotes the "
                        "failed continuation): on the embedded 0.5B model every note halved what a plain rerun "
                        "repaired (attribution/README.md)")


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


def rollback_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``rollback``'s parser."""
    p.add_argument("--run-dir", required=True, help="the run: <task_dir>/run_<r> (or one of its files)")
    p.add_argument("--calibration", help="calibration.json from `calibrate` (strategy conformal)")
    p.add_argument("--strategy", choices=ROLLBACK_STRATEGIES, default="conformal",
                   help="conformal: the set's first step; top1: the most likely step; restart: step 0; retry: step 0 "
                        "without the rollback note (a plain rerun with another seed); oracle: the known decisive "
                        "step (scripted runs with an injected error only)")
    p.add_argument("--force", action="store_true",
                   help="roll back even a run that succeeded or ended in an infrastructure error")
    _add_note(p)
    _add_scoring(p)
    p.set_defaults(func=cmd_rollback)


def rollback_experiment_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``rollback-experiment``'s parser."""
    p.add_argument("--experiment-root", required=True)
    p.add_argument("--calibration", help="calibration.json from `calibrate`")
    p.add_argument("--strategies", default="conformal,top1,restart",
                   help="comma-separated, of conformal, top1, restart, retry, oracle (oracle: runs with a known decisive "
                        "step only; default conformal,top1,restart)")
    _add_scoring(p)
    p.add_argument("--concurrency", type=positive_int, default=4, help="rollbacks at once (default 4)")
    p.add_argument("--out", required=True, help="directory for rollback_results.json and rollbacks.jsonl (the "
                   "rollbacks finished so far: the same command run again reuses them)")
    _add_note(p)
    p.set_defaults(func=cmd_rollback_experiment)


def label_failures_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``label-failures``'s parser."""
    p.description = ("Restarts each failed run at step k (re-executing k onward, as a rollback does) "
                     "and re-evaluates it; the decisive step is the latest k whose restart succeeds, "
                     "found by bisection over the restart points (about log2(steps) + 1 probed points "
                     "per run). Writes one JSON line per failed run: run_id, status, decisive_step, "
                     "decisive_agent, flip_probability and its Wilson interval flip_ci, replays, "
                     "tokens, probes. score-steps --labels and calibrate --labels read it.")
    p.add_argument("--experiment-root", required=True, help="the sweep whose failed runs are labelled")
    p.add_argument("--samples", type=positive_int, default=1,
                   help="replays per probed point, each with its own seed (default 1; more for a stochastic "
                        "model: a point flips when any of its replays succeeds)")
    p.add_argument("--concurrency", type=positive_int, default=2, help="runs labelled at once (default 2)")
    p.add_argument("--out", required=True, help="labels.jsonl to write")
    p.add_argument("--no-note", dest="note", action="store_false",
                   help="replay without telling the resumed agents of the failure, for labels that calibrate "
                        "rollbacks made with --no-note (each label records which: note)")
    p.set_defaults(func=cmd_label_failures)
