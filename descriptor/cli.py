"""``summarize-experiment``: rebuild descriptors, summaries, economics and plots from run files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from descriptor.summaries import ExperimentSummary, summarize_experiment


def _fmt(v: object, spec: str) -> str:
    return "" if v is None else format(v, spec)


def print_summary(summary: ExperimentSummary) -> None:
    """Warnings (to stderr) and a benchmark x system table (rich) of the roll-ups."""
    from rich.console import Console
    from rich.table import Table

    for issue in summary.issues:  # plain print: one unwrapped line per issue, easy to grep
        print(issue.warning().replace("warning: ", f"warning: {summary.experiment_root}/", 1), file=sys.stderr)
    table = Table(title=f"{summary.experiment_root} ({summary.n_runs} runs)")
    for col in ("benchmark", "system", "tasks", "success", "completion", "tokens/run", "cost/run (USD)"):
        table.add_column(col, justify="left" if col in ("benchmark", "system") else "right")
    for r in summary.rollups:
        table.add_row(r["benchmark"], r["system"], str(r["n_tasks"]), _fmt(r["success_rate"], ".3f"),
                      _fmt(r["completion_rate"], ".3f"), _fmt(r["tokens_total"], ".1f"), _fmt(r["cost_total"], ".6f"))
    Console(highlight=False).print(table)
    for e in summary.economics:
        print(f"{e['benchmark']}: {e['system']} vs {e['baseline']} on {e['n_shared_tasks']} tasks: "
              f"G={e['G']:+.3f} K={e['K']:+.1f} {e['cost_unit']} dU={e['dU']:+.4f} "
              f"win/tie/lose={e['win_share']:.2f}/{e['tie_share']:.2f}/{e['lose_share']:.2f}")


def _run(args: argparse.Namespace) -> int:
    summary = summarize_experiment(args.experiment_root, lam=args.lam, cost_unit=args.cost_unit,
                                   baseline=args.baseline, seed=args.seed, plots=not args.no_plots)
    print_summary(summary)
    sys.stdout.flush()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``summarize-experiment`` to the main parser."""
    p = sub.add_parser(
        "summarize-experiment",
        help="rebuild descriptors, summaries, economics and plots from run files",
        description="Read <root>/<benchmark>/<system>/<task_id>/run_<r>.{trace.jsonl,eval.json,result.json} and "
        "(re)write descriptor.json/.csv, analysis.json, task_summary.json per task, summary.json/.csv per system, "
        "and experiment_summary.json/.csv, economics.json/.csv, topology.json and plots/*.png at the root. "
        "Idempotent; damaged or unfinished runs are reported and skipped (a damaged last trace line keeps the valid prefix).",
    )
    p.add_argument("--experiment-root", type=Path, required=True, metavar="DIR", help="the experiment directory")
    p.add_argument("--lambda", dest="lam", type=float, default=None, metavar="L",
                   help="utility price of cost, U = Q - L*C (default 1e-5 per token, or 1.0 per USD)")
    p.add_argument("--cost-unit", choices=("tokens", "usd"), default="tokens", help="cost C for economics (default tokens)")
    p.add_argument("--baseline", default="sas", help="system every other system is compared against (default sas)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--no-plots", action="store_true", help="skip writing plots/*.png")
    p.set_defaults(func=_run)
