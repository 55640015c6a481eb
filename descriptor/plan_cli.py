"""Command ``plan``: how many tasks an experiment needs to detect a given difference (see :mod:`descriptor.power`)."""

from __future__ import annotations

import argparse

from descriptor.errors import UserError


def _unit(name: str, *, open_interval: bool = False):
    """A parser of a number in [0, 1] (``open_interval``: strictly between 0 and 1, as a level or a power is: at
    0 or 1 the normal quantile is infinite)."""
    span = "(0, 1), 0 and 1 excluded" if open_interval else "[0, 1]"

    def parse(value: str) -> float:
        try:
            x = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: expected a number in {span}, got {value!r}") from None
        if not (0 < x < 1 if open_interval else 0 <= x <= 1):
            raise argparse.ArgumentTypeError(f"{name}: expected a number in {span}, got {value!r}")
        return x

    return parse


def cmd_plan(args: argparse.Namespace) -> int:
    from descriptor.power import difference_sd, tasks_needed

    if args.effect == 0 or not 0 <= args.baseline_rate + args.effect <= 1:
        raise UserError(f"--effect {args.effect:g}: baseline + effect must lie in [0, 1] and the effect must not be 0")
    if args.runs_per_task < 1:
        raise UserError(f"--runs-per-task must be at least 1 (got {args.runs_per_task})")
    if args.icc is None:
        from descriptor.power import DEFAULT_ICC

        args.icc = DEFAULT_ICC
    n = tasks_needed(args.baseline_rate, args.effect, runs_per_task=args.runs_per_task, icc=args.icc,
                     alpha=args.alpha, power=args.power)
    sd = difference_sd(args.baseline_rate, args.effect, runs_per_task=args.runs_per_task, icc=args.icc)
    print(f"{n} tasks ({n * args.runs_per_task} runs per system) for {args.power:.0%} power to detect "
          f"{100 * args.effect:+.1f} points from a baseline success rate of {args.baseline_rate:.3f}, two-sided "
          f"at alpha {args.alpha:g}, paired over tasks as the report tests; assumed per-task sd of the difference "
          f"{sd:.3f} (icc {args.icc:g}: the share of a run's variance that is its task's own)")
    return 0


def plan_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``plan``'s parser."""
    p.add_argument("--baseline-rate", type=_unit("--baseline-rate"), required=True, metavar="P",
                   help="the SAS's expected success rate")
    p.add_argument("--effect", type=float, required=True, metavar="D",
                   help="the difference in success rate to detect (0.1 = 10 points)")
    p.add_argument("--runs-per-task", type=int, default=1, metavar="R")
    p.add_argument("--icc", type=_unit("--icc"), default=None, metavar="RHO",
                   help="share of a run's variance that is its task's own (default 0.5)")
    p.add_argument("--alpha", type=_unit("--alpha", open_interval=True), default=0.05)
    p.add_argument("--power", type=_unit("--power", open_interval=True), default=0.8)
    p.set_defaults(func=cmd_plan)
