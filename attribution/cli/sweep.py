"""``run --rollback``: the sweep, then the automatic rollback of its failed runs, then the summary.

Layering: ``mas`` (the runtime, with the ``run`` command) must not import
``attribution``. So this module registers a sweep hook
(:data:`mas.sweep.hooks.SWEEP_HOOKS`, ``rollback``) when it is imported:
``run`` adds its options (:func:`add_arguments`), lets it check them before
any run starts (:func:`prepare`) and calls the rollback it returns between
the sweep and the summary. Without ``--rollback`` it does nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

# descriptor.records, not attribution.rollback.restart: every CLI start-up builds this parser, and the runtime is heavy.
from descriptor.records import ROLLBACK_STRATEGIES
from mas.sweep.hooks import SWEEP_HOOKS, AfterSweep, SweepHook

if TYPE_CHECKING:
    from attribution.rollback.sweep import SweepRollbackOptions
    from mas.sweep.experiment import ExperimentRequest


def prepare(args: argparse.Namespace, req: ExperimentRequest) -> AfterSweep | None:
    """Check the rollback options before any run starts; the rollback to run after the sweep, if asked for."""
    from descriptor.errors import UserError

    tuning = [(f, v) for f, v in (("--rollback-scorer", args.rollback_scorer),
                                  ("--rollback-method", args.rollback_method),
                                  ("--rollback-alpha", args.rollback_alpha),
                                  ("--rollback-folds", args.rollback_folds),
                                  ("--rollback-label-samples", args.rollback_label_samples)) if v is not None]
    if args.rollback is None:
        given = [f for f, v in (("--calibration", args.calibration), *tuning, ("--rollback-labels", args.rollback_labels))
                 if v is not None] + (["--no-rollback-note"] if not args.rollback_note else [])
        if given:
            raise UserError(f"{', '.join(given)}: only used with --rollback STRATEGY")
        return None

    from attribution.rollback.sweep import SELF, SELF_CALIBRATED, SweepRollbackOptions, check_options

    # a flag that would change nothing is refused, as a flag without --rollback is: the user meant something by it
    unused = [f for f, _ in tuning if args.rollback not in SELF_CALIBRATED or (
        args.rollback != "conformal" and f in ("--rollback-method", "--rollback-alpha"))]
    if unused:
        users = "--rollback conformal" if all(f in ("--rollback-method", "--rollback-alpha") for f in unused) else (
            "--rollback conformal or top1")
        raise UserError(f"{', '.join(unused)}: used by {users} (to calibrate), not by --rollback {args.rollback}")
    if args.calibration is not None and args.calibration != SELF and tuning:
        clash = [f for f, _ in tuning]
        raise UserError(f"{', '.join(clash)}: the calibration file fixes the scorer, method and alpha; drop "
                        f"{'it' if len(clash) == 1 else 'them'} or drop --calibration")
    if args.rollback_label_samples is not None and (args.calibration != SELF or args.rollback_labels is not None):
        raise UserError("--rollback-label-samples: used when --calibration self labels the sweep's own failures, "
                        "not with " + ("--rollback-labels" if args.rollback_labels is not None else
                                       f"--calibration {args.calibration}" if args.calibration else
                                       "the sweep's injected errors (no --calibration)"))
    opts = SweepRollbackOptions(
        strategy=args.rollback, calibration=args.calibration, scorer=args.rollback_scorer or "learned",
        method=args.rollback_method or "auto", alpha=0.1 if args.rollback_alpha is None else args.rollback_alpha,
        folds=5 if args.rollback_folds is None else args.rollback_folds, seed=req.cfg.seed,
        labels=args.rollback_labels, note=args.rollback_note,
        label_samples=1 if args.rollback_label_samples is None else args.rollback_label_samples)
    calibration = check_options(req.cfg, opts, req.experiment_root, req.systems)  # bad input stops here
    if opts.strategy in SELF_CALIBRATED:
        from attribution.sources.labelfile import note_mismatch

        said = note_mismatch([opts.labels, *(calibration.label_files if calibration is not None else [])],
                             opts.note, "--no-rollback-note")
        if said:
            print(f"warning: {said}", file=sys.stderr)
    return lambda results: roll_back(req, opts, calibration)


def roll_back(req: ExperimentRequest, opts: SweepRollbackOptions, calibration: Any) -> int:
    """Roll back the finished sweep's failed runs once each and say what happened; the exit status."""
    from attribution.rollback.sweep import rollback_sweep

    from mas.config import supplied_keys

    with supplied_keys(req.cfg):  # a key the config file gave serves the rollbacks of this invocation too
        rec = asyncio.run(rollback_sweep(req.experiment_root, opts, calibration=calibration,
                                         concurrency=req.cfg.concurrency))
    print(f"rollback ({opts.strategy}): {rec.n_rolled_back} of {rec.n_failed} failed run(s) rolled back now"
          + (f", {rec.n_already} earlier" if rec.n_already else "")
          + (f", {rec.n_errors} could not be (see {req.experiment_root}/rollback_sweep.json)" if rec.n_errors else "")
          + (f", {rec.n_without_choice} without a known decisive step left as they are" if rec.n_without_choice
             else ""))
    infinite = [f for f in rec.folds if f.get("q_hat") == "inf"]
    if infinite:
        print(f"note: {len(infinite)} of {len(rec.folds)} calibration fold(s) had too few labelled runs for a finite "
              f"threshold at alpha {rec.alpha} (q_hat = inf): their runs restarted from step 0. Run more tasks for "
              "sets that can leave steps out")
    if rec.n_errors:
        from descriptor.redact import redact

        print(redact(f"error: {rec.n_errors} rollback(s) could not run and their runs stay failed (first: "
                     f"{rec.errors[0][:300]}); run the same command again to retry them"), file=sys.stderr)
        return EXIT_ROLLBACK_ERRORS
    return 0


EXIT_ROLLBACK_ERRORS = 1
"""Exit status when some rollbacks could not run (as ``rollback-experiment``; 2 is bad input)."""


def add_arguments(run: argparse.ArgumentParser) -> None:
    """The rollback options of ``run``."""
    g = run.add_argument_group("automatic rollback (after the sweep, each failed run once)")
    g.add_argument("--rollback", choices=ROLLBACK_STRATEGIES, metavar="STRATEGY",
                   help="roll back every failed run at the end of the sweep: conformal (the calibrated set's first "
                        "step), top1 (the most likely step), restart (step 0), retry (step 0 without the rollback note: "
                        "a plain rerun with another seed) or oracle (the injected step, scripted "
                        "runs only); writes run_<r>.rollback_<k>.* and <root>/rollback_sweep.json, and the summary "
                        "shows success before and after")
    g.add_argument("--calibration", metavar="FILE",
                   help="calibration.json from `calibrate` for --rollback conformal/top1 (it names the scorer); "
                        "self: calibrate on decisive steps found by replay (label-failures), of --rollback-labels "
                        "or else of the sweep's own failed runs, cross-fitted; default: calibrate on the sweep's own "
                        "injected errors, cross-fitted (needs --model scripted --inject-errors)")
    g.add_argument("--rollback-scorer", choices=("learned", "position"),
                   help="self-calibration: trained step scorer (default learned)")
    g.add_argument("--rollback-method",
                   help="self-calibration: conformal method (default auto: chosen among the contiguous ones by "
                        "inner cross-validation)")
    g.add_argument("--rollback-alpha", type=float, metavar="ALPHA",
                   help="self-calibration: miscoverage level, target coverage 1 - ALPHA (default 0.1)")
    g.add_argument("--rollback-folds", type=int, metavar="K",
                   help="self-calibration: cross-fitting folds (default 5)")
    g.add_argument("--rollback-labels", metavar="FILE",
                   help="--calibration self: labels.jsonl of label-failures on earlier failures of the same system "
                        "(default: label this sweep's failed runs by replay, written to <root>/labels.jsonl)")
    g.add_argument("--rollback-label-samples", type=int, metavar="M",
                   help="--calibration self without --rollback-labels: replays per probed point (default 1)")
    g.add_argument("--no-rollback-note", dest="rollback_note", action="store_false",
                   help="resume without telling the agents of the failure (the rollback note otherwise quotes the "
                        "failed continuation; on the embedded 0.5B model it halved what a rerun repaired); the "
                        "sweep's own replay labels are then made without it too")


ROLLBACK_HOOK = SWEEP_HOOKS.register("rollback", SweepHook(add_arguments=add_arguments, prepare=prepare),
                                     origin=f"{__name__}:ROLLBACK_HOOK")
