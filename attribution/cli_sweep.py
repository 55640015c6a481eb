"""``run --rollback``: the sweep, then the automatic rollback of its failed runs, then the summary.

Layering: ``mas`` (the runtime, with the ``run`` command) must not import
``attribution``. So the composition lives here, one level up: :func:`register`
finds the ``run`` subparser that ``mas.cli`` registered (``attribution.cli_main`` lists
this module after it in ``COMMAND_MODULES``), adds the rollback options to it
and replaces its handler with :func:`cmd_run`, which calls the three parts
``mas.cli`` exposes (:func:`~mas.cli.sweep_request`,
:func:`~mas.cli.execute_sweep`, :func:`~mas.cli.report_sweep`) with the
rollback between the last two. Without ``--rollback`` it is ``mas.cli.cmd_run``
unchanged. The rollback options are checked before any run starts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

# descriptor.records, not attribution.rollback: every CLI start-up builds this parser, and the runtime is heavy.
from descriptor.records import ROLLBACK_STRATEGIES


def cmd_run(args: argparse.Namespace) -> int:
    from descriptor.errors import UserError
    from mas.cli import cmd_run as run_only
    from mas.cli import execute_sweep, report_sweep, sweep_request

    if args.rollback is None:
        given = [f for f, v in (("--calibration", args.calibration), ("--rollback-scorer", args.rollback_scorer),
                                ("--rollback-method", args.rollback_method), ("--rollback-alpha", args.rollback_alpha))
                 if v is not None]
        if given:
            raise UserError(f"{', '.join(given)}: only used with --rollback STRATEGY")
        return run_only(args)

    from attribution.sweep_rollback import SweepRollbackOptions, check_options, rollback_sweep
    from mas.logging import configure_logging

    if args.calibration is not None:
        clash = [f for f, v in (("--rollback-scorer", args.rollback_scorer),
                                ("--rollback-method", args.rollback_method),
                                ("--rollback-alpha", args.rollback_alpha)) if v is not None]
        if clash:
            raise UserError(f"{', '.join(clash)}: the calibration file fixes the scorer, method and alpha; drop "
                            f"{'it' if len(clash) == 1 else 'them'} or drop --calibration")
    configure_logging()
    req = sweep_request(args)
    opts = SweepRollbackOptions(
        strategy=args.rollback, calibration=args.calibration, scorer=args.rollback_scorer or "learned",
        method=args.rollback_method or "auto", alpha=0.1 if args.rollback_alpha is None else args.rollback_alpha,
        folds=args.rollback_folds, seed=req.cfg.seed)
    calibration = check_options(req.cfg, opts, req.experiment_root, req.systems)  # bad input stops here, before any run
    results = execute_sweep(req)
    if isinstance(results, int):
        return results
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
    status = report_sweep(req, results)
    if rec.n_errors:
        from descriptor.redact import redact

        print(redact(f"error: {rec.n_errors} rollback(s) could not run and their runs stay failed (first: "
                     f"{rec.errors[0][:300]}); run the same command again to retry them"), file=sys.stderr)
        return max(status, EXIT_ROLLBACK_ERRORS)
    return status


EXIT_ROLLBACK_ERRORS = 1
"""Exit status when some rollbacks could not run (as ``rollback-experiment``; 2 is bad input)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the rollback options to ``run`` (registered by ``mas.cli``) and wrap its handler."""
    run = sub.choices.get("run")
    if run is None:
        raise RuntimeError("attribution.cli_sweep must be registered after mas.cli (COMMAND_MODULES in attribution/cli_main.py)")
    g = run.add_argument_group("automatic rollback (after the sweep, each failed run once)")
    g.add_argument("--rollback", choices=ROLLBACK_STRATEGIES, metavar="STRATEGY",
                   help="roll back every failed run at the end of the sweep: conformal (the calibrated set's first "
                        "step), top1 (the most likely step), restart (step 0) or oracle (the injected step, scripted "
                        "runs only); writes run_<r>.rollback_<k>.* and <root>/rollback_sweep.json, and the summary "
                        "shows success before and after")
    g.add_argument("--calibration", metavar="FILE",
                   help="calibration.json from `calibrate` for --rollback conformal/top1 (it names the scorer); "
                        "default: calibrate on the sweep's own failed runs, cross-fitted (needs --model scripted "
                        "--inject-errors)")
    g.add_argument("--rollback-scorer", choices=("learned", "position"),
                   help="self-calibration: trained step scorer (default learned)")
    g.add_argument("--rollback-method",
                   help="self-calibration: conformal method (default auto: chosen among the contiguous ones by "
                        "inner cross-validation)")
    g.add_argument("--rollback-alpha", type=float, metavar="ALPHA",
                   help="self-calibration: miscoverage level, target coverage 1 - ALPHA (default 0.1)")
    g.add_argument("--rollback-folds", type=int, default=5, metavar="K",
                   help="self-calibration: cross-fitting folds (default 5)")
    run.set_defaults(func=cmd_run)
