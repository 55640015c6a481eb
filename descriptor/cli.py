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


def _count(share: float, n: int) -> int:
    return round(share * n)


def economics_line(e: dict) -> str:
    """One economics row in words: what won on quality and what won on utility are said apart.

    A task where the MAS has the same success but spends more loses on utility
    through its cost alone; the line never lets that read as a quality loss.
    """
    n, unit = e["n_shared_tasks"], e["cost_unit"]
    ci = "" if e["G_ci_low"] is None else f" [{100 * e['G_ci_low']:+.1f}, {100 * e['G_ci_high']:+.1f}]"
    cost = f"{e['K']:+,.0f} tokens" if unit == "tokens" else f"{e['K']:+.6f} USD"
    return (f"{e['benchmark']}: {e['system']} vs {e['baseline']} on {n} tasks: success {100 * e['G']:+.1f} points{ci} (G), "
            f"cost {cost} per run (K), utility dU={e['dU']:+.4f} at lambda={e['lambda']:g}/{unit.rstrip('s')}; "
            f"tasks better/same/worse on quality {_count(e['quality_win_share'], n)}/{_count(e['quality_tie_share'], n)}/"
            f"{_count(e['quality_lose_share'], n)}, on utility {_count(e['win_share'], n)}/{_count(e['tie_share'], n)}/"
            f"{_count(e['lose_share'], n)}")


def print_summary(summary: ExperimentSummary) -> None:
    """Warnings (to stderr) and a benchmark x system table (rich) of the roll-ups.

    Names are never cut: off a terminal (a log, a pipe) the table is as wide as
    its content (rich would otherwise fit it into 80 columns with "…"); on a
    terminal the name columns keep their full width and the numbers give way.
    """
    from rich.console import Console
    from rich.table import Table

    for issue in summary.issues:  # plain print: one unwrapped line per issue, easy to grep
        print(issue.warning().replace("warning: ", f"warning: {summary.experiment_root}/", 1), file=sys.stderr)
    for note in summary.notes:
        print(f"warning: {note}", file=sys.stderr)
    errors = f", {summary.n_errors} errored" if summary.n_errors else ""
    if summary.count_errors_as_failures:
        errors += ", errored runs counted as failures"
    table = Table(title=f"{summary.experiment_root} ({summary.n_runs} runs{errors})")
    rolled = any(r.get("success_after_rollback") is not None for r in summary.rollups)
    extra = ("rolled back", "success after rollback", "+tokens/run", "+cost/run (USD)") if rolled else ()
    for col in ("benchmark", "system"):
        longest = max([len(col), *(len(str(r[col])) for r in summary.rollups)])
        table.add_column(col, justify="left", no_wrap=True, min_width=longest)
    for col in ("tasks", "runs", "errors", "success", "completion", "tokens/run", "cost/run (USD)", *extra):
        table.add_column(col, justify="right")
    for r in summary.rollups:
        cells = [r["benchmark"], r["system"], str(r["n_tasks"]), str(r["n_runs"]),
                 f"{r['n_errors']} ({_fmt(r['error_rate'], '.3f')})", _fmt(r["success_rate"], ".3f"),
                 _fmt(r["completion_rate"], ".3f"), _fmt(r["tokens_total"], ".1f"), _fmt(r["cost_total"], ".6f")]
        if rolled:  # the automatic rollback of `run --rollback`: success before and after, and its extra spend
            cells += [_fmt(r.get("rolled_back"), "d"), _fmt(r.get("success_after_rollback"), ".3f"),
                      _fmt(r.get("rollback_tokens"), ".1f"), _fmt(r.get("rollback_cost_usd"), ".6f")]
        table.add_row(*cells)
    terminal = sys.stdout.isatty()
    Console(highlight=False, width=None if terminal else 10_000, soft_wrap=not terminal).print(table)
    for line in error_rate_warnings(summary.rollups):
        print(line, file=sys.stderr)
    for r in summary.rollups:  # budgets reached: finished runs, counted in every rate, named here
        if hits := r.get("limits_hit"):
            said = ", ".join(f"{n} at limits.{kind}" for kind, n in hits.items())
            print(f"{r['benchmark']}/{r['system']}: runs stopped by a budget: {said}")
    for e in summary.economics:
        print(economics_line(e))


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
