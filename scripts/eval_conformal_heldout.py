"""Conformal sets on Who&When records that no tuning decision saw: EC and RR per method, scorer, subset and alpha.

    python scripts/eval_conformal_heldout.py [--part heldout|devtrain] [--splits 1000] [--seed 0]
        [--scorers learned,position] [--alphas 0.1,0.2,0.3] [--aggregator sum] [--bootstrap 0] [--out FILE]

The paper's definitions beside the authors' released code's, side by side (issue 32, item 10):

    python scripts/eval_conformal_heldout.py --methods crsvp,crsvp_released --alphas 0.1,0.2
    python scripts/eval_conformal_heldout.py --methods crsvp,crsvp_released,lf,rf,twf --aggregator lse
    python scripts/eval_conformal_heldout.py --methods crsvp,crsvp_released,lf,rf,twf --aggregator lse_segment

The dev split is divided once (``scripts/who_and_when_dev_heldout.json``,
made by :func:`attribution.conformal.heldout.heldout_split` with seed 0:
30 % of the question groups of each subset stratum, 37 records, held out;
86 for development). The script refuses a split file the data no longer
reproduce.

- ``--part heldout`` (the reported figures): each scorer is fitted on the 86
  development records only and scores the 37 held-out ones; every method is
  then calibrated and tested on the held-out records with ``--splits`` random
  even calibration/test splits (for ``all`` and, separately, within each
  subset: there the subset's records are split).
- ``--part devtrain``: the development figures, where the set families were
  designed: scores cross-fitted (5 folds by question) on the 86 development
  records, evaluated the same way on them.

EC is the share of test records whose set holds the decisive step, RR the
mean share of steps a set rules out; both are means (± std) over splits.
``--bootstrap B`` adds, for the learned scorer on all records at alpha = 0.2,
a 95 % interval of trim's and auto's EC and RR over B resamplings of the
records (with replacement; 200 splits each), i.e. how much the figure could
move on another draw of records like these.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attribution.conformal import METHODS, Aggregator, method_names  # noqa: E402
from attribution.conformal.evaluation import Evaluator, summarise  # noqa: E402
from attribution.conformal.heldout import check_split, read_split  # noqa: E402
from attribution.sources.loaders import load_who_and_when_dir  # noqa: E402
from attribution.sources.scorefile import ScoreRecord  # noqa: E402
from attribution.scorers import SCORERS, ScorerContext  # noqa: E402
from attribution.scorers.crossfit import group_key  # noqa: E402
from descriptor.errors import UserError  # noqa: E402
from descriptor.io import write_json_atomic  # noqa: E402
from descriptor.stats import percentile_interval  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPLIT = ROOT / "scripts" / "who_and_when_dev_heldout.json"
# Who&When's dev split (attribution/README.md, "Who&When data"): under $MAS_ECON_SHARED_DATA, else ../shared/data.
DEFAULT_DEV = Path(os.environ.get("MAS_ECON_SHARED_DATA") or ROOT.parent / "shared" / "data") / "who_and_when" / "dev"
SUBSETS = ("all", "algorithm_generated", "hand_crafted")


def score(name: str, targets: list, train: list, seed: int) -> list[ScoreRecord]:
    """Scores of ``targets``: fitted on ``train`` alone, or cross-fitted on ``targets`` when ``train`` is empty."""
    results = asyncio.run(SCORERS[name]()(targets, ScorerContext(seed=seed, folds=5, train=train)))
    by_id = {t.id: t for t in targets}
    return [ScoreRecord(id=r.id, n_steps=r.n_steps, step_scores=r.step_scores,
                        mistake_step=by_id[r.id].mistake_step, subset=by_id[r.id].subset) for r in results]


def evaluate(records: list[ScoreRecord], methods, alphas, splits: int, seed: int, agg: Aggregator | None = None) -> dict:
    """``{alpha: {method: results.json-like dict}}`` over random even splits of ``records`` (set score ``agg``)."""
    ev = Evaluator(records, agg or Aggregator(), splits, seed)
    return {a: {m: summarise(ev.run(m, a), m, a, ev) for m in methods} for a in alphas}


def bootstrap(records: list[ScoreRecord], b: int, seed: int, alpha: float = 0.2) -> dict:
    """95 % intervals of trim's and auto's EC and RR over ``b`` record resamplings (200 splits each)."""
    rng = np.random.default_rng([seed, 7])
    draws: dict[str, list[tuple[float, float]]] = {"trim": [], "auto": []}
    for _ in range(b):
        sample = [records[i] for i in rng.integers(len(records), size=len(records))]
        res = evaluate(sample, tuple(draws), (alpha,), 200, int(rng.integers(2**31)))[alpha]
        for m in draws:
            draws[m].append((res[m]["ec_mean"], res[m]["rr_mean"]))
    out = {}
    for m, vals in draws.items():
        arr = np.array(vals)
        out[m] = {"ec_95": [round(x, 3) for x in percentile_interval(arr[:, 0])],
                  "rr_95": [round(x, 3) for x in percentile_interval(arr[:, 1])], "resamples": b}
    return out


def print_table(scorer: str, subset: str, n: int, res: dict, alphas) -> None:
    print(f"\n{scorer} | {subset} | {n} records | EC / RR (mean over splits; std of RR in brackets)")
    print(f"  {'method':14s}" + "".join(f"{'alpha ' + str(a):>24s}" for a in alphas))
    for m in res[alphas[0]]:
        cells = [f"{r['ec_mean']:.3f} / {r['rr_mean']:.3f} ({r['rr_std']:.3f})" for r in (res[a][m] for a in alphas)]
        print(f"  {m:14s}" + "".join(f"{c:>24s}" for c in cells))
    for a in alphas:
        if "auto_choice" in res[a].get("auto", {}):
            print(f"  auto's choices at alpha {a}: {res[a]['auto']['auto_choice']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(DEFAULT_DEV),
                    help="Who&When dev split (default: $MAS_ECON_SHARED_DATA/who_and_when/dev, else "
                         "../shared/data/who_and_when/dev beside the repository)")
    ap.add_argument("--split", default=str(DEFAULT_SPLIT), help="recorded held-out split (JSON)")
    ap.add_argument("--part", choices=("heldout", "devtrain"), default="heldout")
    ap.add_argument("--scorers", default="learned,position", help="comma-separated CPU scorers")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated conformal methods")
    ap.add_argument("--alphas", default="0.1,0.2,0.3")
    ap.add_argument("--aggregator", default="sum", help="set score g of lf, rf, twf, crsvp (default sum)")
    ap.add_argument("--splits", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", type=int, default=0, help="record resamplings for the headline interval")
    ap.add_argument("--out", help="write every figure here (JSON)")
    args = ap.parse_args(argv)
    methods = tuple(args.methods.split(","))
    alphas = tuple(float(a) for a in args.alphas.split(","))
    if unknown := [m for m in methods if m not in method_names()]:
        ap.error(f"--methods: unknown {', '.join(unknown)} (expected some of {', '.join(method_names())})")
    scorers = args.scorers.split(",")
    if unknown := [s for s in scorers if s not in ("learned", "position")]:
        ap.error(f"--scorers: {', '.join(unknown)} not a CPU scorer (expected learned, position)")

    try:
        agg = Aggregator(kind=args.aggregator)
        trajectories = load_who_and_when_dir(args.data_dir).trajectories
        split = read_split(args.split)
        check_split(split, trajectories, args.split)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    dev = [t for t in trajectories if t.id in set(split.train_ids)]
    held = [t for t in trajectories if t.id in set(split.heldout_ids)]
    if {group_key(t) for t in dev} & {group_key(t) for t in held}:
        print("error: a question appears on both sides of the split", file=sys.stderr)
        return 2
    targets, train = (held, dev) if args.part == "heldout" else (dev, [])
    print(f"part {args.part}: {len(targets)} records evaluated; scorers "
          + (f"fitted on the {len(dev)} development records only" if train else "cross-fitted on them (5 folds)")
          + f"; {args.splits} even splits, seed {args.seed}; set score {args.aggregator}")

    report: dict = {"part": args.part, "split": str(args.split), "splits": args.splits, "seed": args.seed,
                    "aggregator": args.aggregator,
                    "n_dev": len(dev), "n_heldout": len(held), "results": {}}
    for name in scorers:
        records = score(name, targets, train, args.seed)
        for subset in SUBSETS:
            recs = [r for r in records if subset == "all" or r.model_extra.get("subset") == subset]
            res = evaluate(recs, methods, alphas, args.splits, args.seed, agg)
            print_table(name, subset, len(recs), res, alphas)
            report["results"].setdefault(name, {})[subset] = {str(a): v for a, v in res.items()}
        if args.bootstrap and name == "learned":
            report["bootstrap"] = bootstrap(records, args.bootstrap, args.seed)
            print(f"\nlearned | all | alpha 0.2 | 95 % over {args.bootstrap} record resamplings: {report['bootstrap']}")
    if args.out:
        write_json_atomic(args.out, json.loads(json.dumps(report, default=float)))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
