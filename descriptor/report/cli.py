"""``report``: write the experiment's HTML report (``<root>/report/index.html``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _run(args: argparse.Namespace) -> int:
    from descriptor.outputs import check_output
    from descriptor.report.build import print_report, write_report
    from descriptor.report.render import REPORT_OUT

    if args.out is not None:
        check_output(args.out, REPORT_OUT, inputs=[*(args.compare or ()), *(args.attribution or ())])
    index = write_report(args.experiment_root, out=args.out, compare=args.compare or (), baseline=args.baseline,
                         attribution=args.attribution or (), lam=args.lam, cost_unit=args.cost_unit, seed=args.seed)
    print_report(index)
    return 0


def report_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``report``'s parser."""
    p.description = (
        "Read <root>/<benchmark>/<system>/<task_id>/run_<r>.* and write <root>/report/index.html: "
        "the MAS-vs-baseline answer per benchmark (paired differences, intervals, sign test), an overview, plots, "
        "topology pictures, a task x system grid and a run viewer for every run (transcript, verdict, attribution "
        "marks, rollbacks). Attribution results are read from <root>/attribution/ and --attribution; rollbacks from "
        "run_<r>.rollback_<k>.json beside each run. Prints the index's path.")
    p.add_argument("--experiment-root", type=Path, required=True, metavar="DIR", help="the experiment directory")
    p.add_argument("--compare", type=Path, nargs="+", metavar="DIR2",
                   help="other experiment roots to show against this one (same benchmark/system keys)")
    p.add_argument("--out", type=Path, default=None, metavar="PATH",
                   help="report directory (default DIR/report); index.html is written inside it")
    p.add_argument("--baseline", default=None,
                   help="system every other system is compared against (default sas, when the experiment has it)")
    p.add_argument("--attribution", type=Path, action="append", metavar="PATH",
                   help="a score-steps score file, predict-set output, attribute output directory, or a directory "
                        "holding them (repeatable; DIR/attribution/ is always searched)")
    p.add_argument("--lambda", dest="lam", type=float, default=None, metavar="L",
                   help="utility price of cost, U = Q - L*C (default 1e-5 per token, or 1.0 per USD)")
    p.add_argument("--cost-unit", choices=("tokens", "usd"), default="tokens", help="cost C for economics (default tokens)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=_run)
