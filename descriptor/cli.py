"""``summarize-experiment``: rebuild descriptors, summaries, economics and plots from run files."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path


def prepare_after_pass(report: bool) -> None:
    """Import what ``summarize-experiment`` needs once the runs are read: numpy (the economics' bootstrap), rich
    (the table) and, with the report, jinja2 and the report's templates (~0.3 s of CPU in all).

    Called while the forked workers read the runs (``meanwhile``), so on a machine with a free core it overlaps
    their work instead of following it; without workers, it is only done first.
    """
    # numpy's OpenBLAS starts a thread per core when imported (~0.07 s of CPU here, ~1/3 of numpy's import);
    # this command's arrays are a few hundred numbers, which it never splits between threads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy.random  # noqa: F401
    import rich.console  # noqa: F401
    import rich.table  # noqa: F401

    if report:
        from descriptor.report.render import environment

        for name in ("index.html.j2", "run.html.j2"):
            environment().get_template(name)


def _run(args: argparse.Namespace) -> int:
    from descriptor.summaries import summarize_experiment  # ~0.4 s of imports other commands skip

    options = {"lam": args.lam, "cost_unit": args.cost_unit, "baseline": args.baseline, "seed": args.seed,
               "plots": not args.no_plots, "count_errors_as_failures": args.count_errors_as_failures}
    meanwhile = functools.partial(prepare_after_pass, not args.no_report)
    if args.no_report:
        summary = summarize_experiment(args.experiment_root, meanwhile=meanwhile, **options)
    else:
        from descriptor.report.build import report_build

        # One pass over the runs for both: the report's reads the runs the summaries describe.
        with report_build(args.experiment_root, baseline=args.baseline, lam=args.lam,
                          cost_unit=args.cost_unit, seed=args.seed) as build:
            summary = summarize_experiment(args.experiment_root, reader=functools.partial(
                build.read, meanwhile=meanwhile), **options)
    from descriptor.console_summary import print_summary

    print_summary(summary)
    if not args.no_report:
        from descriptor.report.build import print_report

        print_report(build.index)
    sys.stdout.flush()
    return 0


def summarize_experiment_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``summarize-experiment``'s parser."""
    p.description = (
        "Read <root>/<benchmark>/<system>/<task_id>/run_<r>.{trace.jsonl,eval.json,result.json} and "
        "(re)write descriptor.json/.csv, analysis.json, task_summary.json per task, summary.json/.csv per system, "
        "and experiment_summary.json/.csv, economics.json/.csv, topology.json and plots/*.svg at the root, then "
        "refreshes the HTML report DIR/report/index.html (see `report`). "
        "Idempotent; damaged or unfinished runs are reported and skipped (a damaged last trace line keeps the valid prefix).")
    p.add_argument("--experiment-root", type=Path, required=True, metavar="DIR", help="the experiment directory")
    p.add_argument("--lambda", dest="lam", type=float, default=None, metavar="L",
                   help="utility price of cost, U = Q - L*C (default 1e-5 per token, or 1.0 per USD)")
    p.add_argument("--cost-unit", choices=("tokens", "usd"), default="tokens", help="cost C for economics (default tokens)")
    p.add_argument("--baseline", default=None, help="system every other system is compared against (default sas)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--no-plots", action="store_true", help="skip writing plots/*.svg")
    p.add_argument("--count-errors-as-failures", action="store_true",
                   help="count runs that ended in an infrastructure error as finished runs with completion and "
                        "success 0 in every metric (the seed's literal rule, for a final table); by default they "
                        "are left out and counted apart. The HTML report keeps the default rule")
    p.add_argument("--no-report", action="store_true", help="skip refreshing the HTML report (DIR/report/index.html)")
    p.set_defaults(func=_run)
