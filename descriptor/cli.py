"""``summarize-experiment``: rebuild descriptors, summaries, economics and plots from run files."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from descriptor.summaries import ExperimentSummary


def _fmt(v: object, spec: str) -> str:
    return "" if v is None else format(v, spec)


def print_summary(summary: ExperimentSummary) -> None:
    """Warnings (to stderr), the benchmark x system table of the roll-ups and one sentence per comparison
    (:mod:`descriptor.console_summary`).

    Nothing is cut: on a terminal the table fits its width (split into several tables when it must); off one (a
    log, a pipe) it is one table as wide as its content (rich would otherwise fit it into 80 columns with "…").
    """
    from rich.console import Console

    from descriptor.console_summary import comparison_sentences, print_summary_table

    for issue in summary.issues:  # plain print: one unwrapped line per issue, easy to grep
        print(issue.warning().replace("warning: ", f"warning: {summary.experiment_root}/", 1), file=sys.stderr)
    for note in summary.notes:
        print(f"warning: {note}", file=sys.stderr)
    terminal = sys.stdout.isatty()
    console = Console(highlight=False, width=None if terminal else 10_000)
    print_summary_table(summary, console, width=console.width if terminal else None)
    for line in error_rate_warnings(summary.rollups):
        print(line, file=sys.stderr)
    for r in summary.rollups:  # budgets reached: finished runs, counted in every rate, named here
        if hits := r.get("limits_hit"):
            said = ", ".join(f"{n} at limits.{kind}" for kind, n in hits.items())
            print(f"{r['benchmark']}/{r['system']}: runs stopped by a budget: {said}")
    for sentence in comparison_sentences(summary):  # wrapped at words on a terminal, one line in a log
        console.print(sentence, markup=False)


def error_rate_warnings(rollups: list[dict[str, object]]) -> list[str]:
    """One warning per benchmark whose systems differ in their rate of errored runs (infrastructure failures).

    Success rates are over finished runs only; when one system lost more runs
    to errors than another, the two rates rest on different sets of tasks and
    draws, so the comparison is weaker than it looks.
    """
    by_bench: dict[str, list[dict[str, object]]] = {}
    for r in rollups:
        by_bench.setdefault(str(r["benchmark"]), []).append(r)
    out = []
    for bench, rows in sorted(by_bench.items()):
        if len({r["error_rate"] for r in rows}) > 1:
            rates = ", ".join(f"{r['system']} {_fmt(r['error_rate'], '.3f')}" for r in rows)
            out.append(f"warning: {bench}: systems differ in their error rate ({rates}); success rates count "
                       "finished runs only, so they compare different sets of runs: run the sweep again to "
                       "retry the errored runs")
    return out


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
    print_summary(summary)
    if not args.no_report:
        from descriptor.report.cli import print_report

        print_report(build.index)
    sys.stdout.flush()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``summarize-experiment`` to the main parser."""
    p = sub.add_parser(
        "summarize-experiment",
        help="rebuild descriptors, summaries, economics and plots from run files",
        description="Read <root>/<benchmark>/<system>/<task_id>/run_<r>.{trace.jsonl,eval.json,result.json} and "
        "(re)write descriptor.json/.csv, analysis.json, task_summary.json per task, summary.json/.csv per system, "
        "and experiment_summary.json/.csv, economics.json/.csv, topology.json and plots/*.svg at the root, then "
        "refreshes the HTML report DIR/report/index.html (see `report`). "
        "Idempotent; damaged or unfinished runs are reported and skipped (a damaged last trace line keeps the valid prefix).",
    )
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
