"""Timing of conformal evaluation on synthetic score files: seconds per method.

    python scripts/bench_conformal.py [--records 120] [--splits 1000] [--seed 0]

Prints, per method, wall seconds for all splits at alpha = 0.2 and the
resulting EC / RR / NFE, plus the one-off precomputation time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attribution.conformal import METHODS, Aggregator  # noqa: E402
from attribution.conformal.evaluation import Evaluator, coverage_curve, summarise, synthetic_records  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=120)
    ap.add_argument("--splits", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=30, help="longest synthetic trajectory (steps)")
    args = ap.parse_args()

    records = synthetic_records(args.records, seed=args.seed, max_len=args.max_len)
    for kind in ("sum", "max", "lse", "lse_segment"):
        t0 = time.perf_counter()
        ev = Evaluator(records, Aggregator(kind=kind), args.splits, args.seed)
        for m in METHODS:  # precompute thresholds once, timed apart from the split loop
            ev.run(m, 0.2)
        prep = time.perf_counter() - t0
        print(f"aggregator {kind}: {args.records} records, {args.splits} splits; "
              f"setup incl. first run of each method {prep:.2f} s")
        for m in METHODS:
            t0 = time.perf_counter()
            res = summarise(ev.run(m, 0.2), m, 0.2, ev)
            dt = time.perf_counter() - t0
            print(f"  {m:6s} {dt * 1000:8.1f} ms   EC {res['ec_mean']:.4f}  RR {res['rr_mean']:.4f}  "
                  f"NFE {res['nfe_mean']:.2f}")
        t0 = time.perf_counter()
        coverage_curve(ev)
        print(f"  coverage curve ({len(METHODS)} methods x 10 targets): {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
