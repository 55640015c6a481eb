"""CLI commands of conformal error attribution: ``conformal``, ``calibrate``, ``predict-set``."""

from __future__ import annotations

import argparse
import json
import sys

from attribution.conformal import AGGREGATORS, DEFAULT_BETA, DEFAULT_LAM, Aggregator, method_names
from descriptor.cliargs import positive_int
from descriptor.outputs import OutputKind, check_output

METHOD_HELP = ("conformal algorithm: the paper's vcp (not contiguous), crsvp (tree nodes), lf, rf, twf; "
               "crsvp_released (crsvp as the authors' released code builds it); "
               "trim, grow, band (contiguous families for a sharp scorer); auto (chooses among trim, grow, "
               "band, rf, lf, twf by inner cross-validation on the calibration records)")


def _add_set_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scores", required=True, help="score file (JSONL written by score-steps)")
    p.add_argument("--aggregator", choices=AGGREGATORS, default="sum",
                   help="set score g of lf, rf, twf, crsvp: normalised sum (default), max + length penalty, "
                        "the paper's normalised LogSumExp as Eq. 19 prints it (lse: trajectory length l, - log l "
                        "outside the 1/beta), lse_inside (- log l inside the 1/beta) or lse_segment (the released "
                        "code's: the segment's length, inside)")
    p.add_argument("--lam", type=float, default=DEFAULT_LAM,
                   help=f"max aggregator: weight of the length penalty (default {DEFAULT_LAM}; the paper uses 0.01-0.1)")
    p.add_argument("--beta", type=float, default=DEFAULT_BETA,
                   help=f"LogSumExp aggregators: inverse temperature (default {DEFAULT_BETA})")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of splits, crsvp's interpolation draws and auto's inner splits (default 0)")
    p.add_argument("--twf-fallback", dest="twf_fallback", action="store_true",
                   help="twf: replace an empty intersection by the top-1 step (beyond the paper, which "
                        "leaves it empty; the default)")


def _agg(args: argparse.Namespace) -> Aggregator:
    return Aggregator(kind=args.aggregator, lam=args.lam, beta=args.beta)


def _method_choices() -> tuple[str, ...] | None:
    """``--method``'s choices; None when a conformal plugin does not load (the command then says so when it reads
    the methods: a broken plugin of this group must not break the parser of every command)."""
    from descriptor.registry import RegistryError

    try:
        return method_names()
    except RegistryError:
        return None


CONFORMAL_OUT = OutputKind("conformal output directory", files=("results.json", "coverage_curve.json"))
CALIBRATION_FILE = OutputKind("calibration file", keys=frozenset({"q_hat", "method"}))
PREDICTED_SETS = OutputKind("predicted-sets file", keys=frozenset({"id", "set"}), lines=True)


def _conformal(args: argparse.Namespace) -> int:
    from attribution.conformal.evaluation import run_conformal

    method_names()  # a conformal plugin that did not load (no --method choices then) says so here
    check_output(args.out, CONFORMAL_OUT, inputs=[args.scores])
    res = run_conformal(args.scores, args.method, args.alpha, args.splits, args.seed, _agg(args), args.out,
                        plots=not args.no_plots, twf_fallback=args.twf_fallback)
    print(f"{res['method']} alpha={res['alpha']} on {res['n']} labelled trajectories "
          f"({res['n_skipped_null_mistake']} skipped: null mistake_step), {res['splits']} splits of "
          f"{res['n_cal']} calibration / {res['n_test']} test")
    print(f"  EC  {res['ec_mean']:.4f} ± {res['ec_std']:.4f}  (target {res['target_coverage']:.2f}, "
          f"upper bound {res['coverage_upper_bound']:.4f})")
    print(f"  RR  {res['rr_mean']:.4f} ± {res['rr_std']:.4f}")
    print(f"  NFE {res['nfe_mean']:.2f} ± {res['nfe_std']:.2f}  (mean steps {res['mean_steps']:.1f})")
    print(f"wrote {args.out}/results.json")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from attribution.conformal import calibrate_file

    method_names()  # a conformal plugin that did not load (no --method choices then) says so here
    check_output(args.out, CALIBRATION_FILE, inputs=[args.scores, args.labels])
    cal = calibrate_file(args.scores, args.method, args.alpha, _agg(args), args.seed, args.out, args.twf_fallback,
                         labels=args.labels)
    q = "inf" if cal.q_hat == float("inf") else f"{cal.q_hat:.6g}"
    scorer = cal.scorer or "an unrecorded scorer"
    chosen = f", the method chosen on {cal.n_selection} others" if cal.n_selection else ""
    print(f"{cal.method} ({cal.resolved_method}) alpha={cal.alpha} q_hat={q} from {cal.n} trajectories{chosen} "
          f"({cal.n_skipped} skipped: null mistake_step) scored by {scorer}; wrote {args.out}")
    return 0


def _predict_set(args: argparse.Namespace) -> int:
    from attribution.conformal import predict_file
    from descriptor.io import write_text_atomic

    if args.out:
        check_output(args.out, PREDICTED_SETS, inputs=[args.calibration, args.scores])
    rows = predict_file(args.calibration, args.scores)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if args.out:
        write_text_atomic(args.out, text)
        print(f"wrote {len(rows)} sets to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def conformal_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``conformal``'s parser."""
    p.description = ("Writes DIR/results.json (EC, RR, NFE mean ± std over splits), "
                     "DIR/coverage_curve.json and PNG plots. Records with a null "
                     "mistake_step are skipped.")
    _add_set_options(p)
    p.add_argument("--method", required=True, choices=_method_choices(), help=METHOD_HELP)
    p.add_argument("--alpha", type=float, default=0.2, help="miscoverage level; target coverage 1 - alpha (default 0.2)")
    p.add_argument("--splits", type=positive_int, default=1000, help="random even calibration/test splits (default 1000)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--no-plots", action="store_true", help="skip the coverage curve and PNG plots")
    p.set_defaults(func=_conformal)


def calibrate_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``calibrate``'s parser."""
    p.description = ('Writes calibration.json; an infinite threshold is written as "inf". The score '
                     "file's scorer (and its training data) is recorded, so rollback scores "
                     "new runs the same way.")
    _add_set_options(p)
    p.add_argument("--method", required=True, choices=_method_choices(), help=METHOD_HELP)
    p.add_argument("--alpha", type=float, required=True, help="miscoverage level; target coverage 1 - alpha")
    p.add_argument("--labels", default=None,
                   help="labels.jsonl of label-failures: its decisive steps replace the score file's mistake_step "
                        "(records it does not label are skipped)")
    p.add_argument("--out", required=True, help="calibration.json to write")
    p.set_defaults(func=_calibrate)


def predict_set_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``predict-set``'s parser."""
    p.description = ("Prints one JSON object per record: id, set, set_size, restart_step, nfe, "
                     "covered (null when mistake_step is unknown).")
    p.add_argument("--calibration", required=True, help="calibration.json from calibrate")
    p.add_argument("--scores", required=True, help="score file of the runs to predict on")
    p.add_argument("--out", help="write the JSON lines here instead of stdout")
    p.set_defaults(func=_predict_set)
