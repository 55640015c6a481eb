"""Rollback of natural failures on the embedded model, calibrated on the system's own replay labels (issue 29).

    python scripts/bench_natural_rollback.py [--config config/natural_rollback.toml] [--system debate]
        [--cal-tasks 50] [--test-tasks 50] [--samples 2] [--concurrency 4] [--alpha 0.2] [--method auto]
        [--scorer position] [--keep DIR] [--no-note] [--draws K]

As a user runs it, one command after another (each resumes what an interrupted invocation finished, so the same
command with the same ``--keep`` picks up where it stopped):

1. a calibration sweep (``--cal-tasks`` arith tasks, seed 0) and a held-out sweep (other tasks, seed 1) of
   ``--system`` on the embedded model (``--config``);
2. ``label-failures --samples m`` on the calibration sweep's failed runs: each one's decisive step by replay;
3. ``score-steps --runs-dir --labels --scorer`` (cross-fitted) and ``calibrate --labels --method --alpha``;
4. ``rollback-experiment --strategies conformal,top1,restart,retry`` on the held-out sweep's failed runs.

Prints the labels (labelled, unrepairable, decisive steps, replays and tokens per failure) and, per strategy,
success with its Wilson 95 % interval, the tokens a rollback spent (mean, bootstrap 95 % interval) and the
restart steps. Goal (issue 29): conformal's success >= restart's at <= 0.7 x restart's tokens; the line says
which parts hold and whether the success difference is within sampling error (paired: the same failures). A
line before it compares conformal with ``retry`` the same way.

``--no-note`` labels and rolls back without telling the resumed agents of the failure (``label-failures
--no-note``, ``rollback-experiment --no-note``); its files get a ``_nonote`` suffix, and those of another scorer
than ``position`` the scorer's name (``scores_nonote_learned.jsonl``; the labels are the same), so every variant
shares the sweeps under one ``--keep``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import cli, work_dir  # noqa: E402
from descriptor.stats import bootstrap_mean_ci, wilson_interval  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STRATEGIES = ("conformal", "top1", "restart", "retry")
"""``retry``: a plain rerun with another seed and no rollback note, the baseline a user has without any rollback."""


def sweep(out: Path, name: str, *, seed: int, tasks: int, args: argparse.Namespace) -> Path:
    cli("run", "--config", str(args.config), "--benchmark", "arith", "--systems", args.system, "--task-limit",
        str(tasks), "--seed", str(seed), "--output-root", str(out), "--experiment-id", name, "--progress", "log")
    return out / name


def label_summary(labels: list[dict[str, Any]]) -> str:
    by_status = collections.Counter(x["status"] for x in labels)
    steps = collections.Counter(x["decisive_step"] for x in labels if x["status"] == "labelled")
    n = len(labels) or 1
    return (f"{len(labels)} failures: {by_status['labelled']} labelled, {by_status['unrepairable']} unrepairable, "
            f"{by_status['error']} errors; decisive step (count) "
            + ", ".join(f"{k} ({v})" for k, v in sorted(steps.items()))
            + f"; {sum(x['replays'] for x in labels) / n:.2f} replays and {sum(x['tokens'] for x in labels) / n:,.0f}"
              " tokens per failure")


def strategy_rows(results_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Each strategy's rollback records from ``rollback_results.json``, errors left out (no outcome)."""
    results = json.loads((results_dir / "rollback_results.json").read_text(encoding="utf-8"))
    return {name: [r for r in results[name]["runs"] if r.get("status") != "error"]
            for name in STRATEGIES if name in results}


def pooled_rows(results_dirs: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """:func:`strategy_rows` of several draws (each failure rolled back once per draw), pooled per strategy."""
    out: dict[str, list[dict[str, Any]]] = {}
    for d in results_dirs:
        for name, recs in strategy_rows(d).items():
            out.setdefault(name, []).extend(recs)
    return out


def _success_by_run(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each failure's share of successful rollbacks (one per draw)."""
    seen: dict[str, list[float]] = {}
    for r in rows:
        seen.setdefault(r["run"], []).append(float(r["success"]))
    return {k: sum(v) / len(v) for k, v in seen.items()}


def paired_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[float, tuple[float, float], int]:
    """Mean success difference a - b over the failures both rolled back (each failure's mean over its draws),
    with a bootstrap 95 % interval over the failures."""
    sa, sb = _success_by_run(a), _success_by_run(b)
    both = sorted(set(sa) & set(sb))
    diffs = [sa[k] - sb[k] for k in both]
    if not diffs:
        return float("nan"), (float("nan"), float("nan")), 0
    return sum(diffs) / len(diffs), bootstrap_mean_ci(diffs, seed=0), len(diffs)


def report(rows: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = [f"  {'strategy':10s} {'runs':>5s} {'success [Wilson 95 %]':>26s} {'tokens per rollback':>28s}"
             "   restart steps (count)"]
    means: dict[str, tuple[float, float]] = {}  # strategy -> (success rate, tokens per rollback)
    for name in STRATEGIES:
        recs = rows.get(name, [])
        wins = sum(r["success"] for r in recs)
        lo, hi = wilson_interval(wins, len(recs))
        toks = [float(r["tokens"]) for r in recs]
        tlo, thi = bootstrap_mean_ci(toks, seed=0) if toks else (float("nan"), float("nan"))
        mean = sum(toks) / len(toks) if toks else float("nan")
        if recs:
            means[name] = (wins / len(recs), mean)
        starts = collections.Counter(r["restart_step"] for r in recs)
        lines.append(f"  {name:10s} {len(recs):5d} {f'{wins}/{len(recs)} = {wins / max(len(recs), 1):.3f} [{lo:.2f}, {hi:.2f}]':>26s}"
                     f" {f'{mean:,.0f} [{tlo:,.0f}, {thi:,.0f}]':>28s}   "
                     + ", ".join(f"{k} ({v})" for k, v in sorted(starts.items())))
    for base in ("retry", "restart"):  # the goal (against restart) last
        if "conformal" not in means or base not in means:
            continue
        (sc, tc), (sr, tr) = means["conformal"], means[base]
        d, (dlo, dhi), n = paired_difference(rows["conformal"], rows[base])
        ratio = tc / tr if tr else float("nan")
        ok_s, ok_t = sc >= sr, ratio <= 0.7
        lines.append(f"  {'goal' if base == 'restart' else 'against retry'}: conformal success {sc:.3f} >= {base} "
                     f"{sr:.3f}: {'met' if ok_s else 'MISSED'} (paired difference {d:+.3f} [{dlo:+.2f}, {dhi:+.2f}] "
                     f"over {n} failures); tokens {ratio:.2f} x {base}'s <= 0.70: {'met' if ok_t else 'MISSED'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "config" / "natural_rollback.toml")
    ap.add_argument("--system", default="debate")
    ap.add_argument("--cal-tasks", type=int, default=50)
    ap.add_argument("--test-tasks", type=int, default=50)
    ap.add_argument("--samples", type=int, default=2, help="replays per probed point in label-failures")
    ap.add_argument("--concurrency", type=int, default=4, help="failed runs labelled and rolled back at once")
    ap.add_argument("--alpha", type=float, default=0.2)
    ap.add_argument("--method", default="auto", help="conformal method of calibrate (default auto)")
    ap.add_argument("--scorer", default="position", help="step scorer of score-steps (default position)")
    ap.add_argument("--keep", type=Path, help="write the sweeps and results here (and resume there) instead of a "
                                              "temporary directory")
    ap.add_argument("--no-note", dest="note", action="store_false",
                    help="label and roll back without the rollback note (files suffixed _nonote)")
    ap.add_argument("--draws", type=int, default=1,
                    help="roll every held-out failure back this many times per strategy, each draw with its own "
                         "rollback seeds (draw k > 1 in rollback..._d<k>), and pool them: one draw of 25 failures "
                         "put the same step-0 restart anywhere from 6 to 12 repairs (default 1)")
    args = ap.parse_args(argv)
    if args.draws < 1:
        ap.error(f"--draws must be at least 1 (got {args.draws})")
    if not args.config.is_file():
        ap.error(f"--config {args.config}: no such file")

    with work_dir(args.keep, "bench_natural_rollback_") as root:
        t0 = time.perf_counter()
        cal = sweep(root, "cal", seed=0, tasks=args.cal_tasks, args=args)
        test = sweep(root, "test", seed=1, tasks=args.test_tasks, args=args)
        t_sweeps = time.perf_counter()
        sfx, quiet = ("", ()) if args.note else ("_nonote", ("--no-note",))
        labels_path = root / f"labels{sfx}.jsonl"  # labels do not depend on the scorer: shared by every --scorer
        if args.scorer != "position":
            sfx += f"_{args.scorer}"
        cli("label-failures", "--experiment-root", str(cal), "--samples", str(args.samples), "--concurrency",
            str(args.concurrency), "--out", str(labels_path), *quiet)
        t_labels = time.perf_counter()
        labels = [json.loads(x) for x in labels_path.read_text(encoding="utf-8").splitlines() if x.strip()]
        scores = root / f"scores{sfx}.jsonl"
        cli("score-steps", "--runs-dir", str(cal), "--labels", str(labels_path), "--scorer", args.scorer,
            "--out", str(scores))
        calibration = root / f"calibration{sfx}.json"
        cli("calibrate", "--scores", str(scores), "--labels", str(labels_path), "--method", args.method,
            "--alpha", str(args.alpha), "--out", str(calibration))
        outs = [root / (f"rollback{sfx}" if k == 1 else f"rollback{sfx}_d{k}") for k in range(1, args.draws + 1)]
        for out in outs:  # a new --out is a new draw: its rollbacks take the runs' next rollback indices and seeds
            cli("rollback-experiment", "--experiment-root", str(test), "--calibration", str(calibration),
                "--strategies", ",".join(STRATEGIES), "--concurrency", str(args.concurrency), "--out", str(out),
                *quiet)
        t_end = time.perf_counter()
        rows = pooled_rows(outs)
        cal_info = json.loads(calibration.read_text(encoding="utf-8"))
        print(f"\n{args.system} on arith, embedded model ({args.config.name}); calibration sweep {args.cal_tasks} "
              f"tasks (seed 0), held-out sweep {args.test_tasks} other tasks (seed 1)")
        print(f"labels ({args.samples} replays per probed point{'' if args.note else ', no rollback note'}): "
              f"{label_summary(labels)}")
        print(f"calibration: {args.scorer} scorer, {cal_info['method']} ({cal_info['resolved_method']}) at alpha "
              f"{args.alpha}, q_hat {cal_info['q_hat']}, {cal_info['n']} labelled runs")
        print("rollbacks of the held-out sweep's failed runs"
              + (f" ({args.draws} draws pooled; paired differences over each failure's mean):" if args.draws > 1
                 else ":"))
        print("\n".join(report(rows)))
        print(f"wall time: sweeps {t_sweeps - t0:.0f} s, labels {t_labels - t_sweeps:.0f} s, scoring and "
              f"rollbacks {t_end - t_labels:.0f} s; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        (root / f"bench_natural_rollback{sfx}.json").write_text(json.dumps(
            {"labels": labels, "rollbacks": rows, "calibration": cal_info}, indent=1), encoding="utf-8")
        if args.keep:
            print(f"files: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
