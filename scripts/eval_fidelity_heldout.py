"""ECHO and CHIEF as their papers write them beside the project's own versions, on the held-out Who&When records.

    python scripts/eval_fidelity_heldout.py --model embedded --config config/attribution_heldout.toml \\
        --out runs/fidelity_heldout --minutes 60

The records are the held-out part of the Who&When dev split
(``scripts/who_and_when_dev_heldout.json``, checked against the data), linked
into ``OUT/heldout/<subset>/``. Each variant (``--variant NAME=METHOD[:KEY=VALUE,...]``,
repeatable; by default ``echo_paper``, ``echo_project``, ``chief_paper``,
``chief_project``: the method with ``variant=paper`` or ``variant=project``) is an
``attribute`` job per subset writing ``OUT/runs/NAME/SUBSET/``. The jobs run
in rounds: round r runs every variant on the algorithm-generated records,
then every variant on the hand-crafted ones, each with ``--max-cases r`` (in
file order), so all variants grow over the same records, one record per
subset and variant a round. ``--minutes`` stops starting jobs once that much
wall time has passed (a started job finishes its new record);
``--max-records`` caps r; ``--subset`` keeps one subset. Every job resumes:
the same command again keeps every finished record and goes on.
``--report-only`` prints the table without running anything.

The table: per variant and subset, the records finished (``n``; a case the
method failed on is not a result and is listed apart as ``err``, and is tried
again on the next run), agent and step accuracy as k/n with 95 % Wilson
intervals, mean model calls, tokens and seconds per record. Then each pair
of variants of one method (paper against project) on the records both
finished, with the discordant records and the exact two-sided sign test
(McNemar's) of each accuracy. CHIEF leaves the 3 held-out records that are
in its exemplar pool out, so its n is lower. ``OUT/summary.json`` holds the
same figures; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attribution.cli.attribute import parse_method_options  # noqa: E402
from attribution.conformal.heldout import check_split, read_split  # noqa: E402
from attribution.evaluate import CaseRecord, agent_correct, attribution_metrics, step_within  # noqa: E402
from attribution.jobs import PARTIAL, AttributeJob, run_attribute_job  # noqa: E402
from attribution.sources.loaders import load_who_and_when_dir  # noqa: E402
from descriptor.errors import UserError  # noqa: E402
from descriptor.io import write_json_atomic  # noqa: E402
from descriptor.stats import sign_test, wilson_interval  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPLIT = ROOT / "scripts" / "who_and_when_dev_heldout.json"
DEV = Path(os.environ.get("MAS_ECON_SHARED_DATA") or ROOT.parent / "shared" / "data") / "who_and_when" / "dev"
DEFAULT_VARIANTS = ["echo_paper=echo:variant=paper", "echo_project=echo:variant=project",
                    "chief_paper=chief:variant=paper", "chief_project=chief:variant=project"]


def parse_variant(text: str) -> tuple[str, str, dict[str, Any]]:
    """``NAME=METHOD[:KEY=VALUE,...]`` as (name, method, options).

    >>> parse_variant("echo_paper=echo:variant=paper,k=3")
    ('echo_paper', 'echo', {'variant': 'paper', 'k': 3})
    """
    name, sep, rest = text.partition("=")
    method, _, opts = rest.partition(":")
    if not sep or not name.strip() or not method.strip() or "/" in name:
        raise UserError(f"--variant: expected NAME=METHOD[:KEY=VALUE,...], got {text!r}")
    pairs = [p for p in opts.split(",") if p.strip()]
    return name.strip(), method.strip(), parse_method_options(pairs)


def link_heldout(dev: Path, split_path: Path, into: Path) -> list[str]:
    """Symlink the split's held-out records into ``into/<subset>/`` (existing links kept); their ids."""
    trajs = load_who_and_when_dir(dev, "all").trajectories
    split = read_split(split_path)
    check_split(split, trajs, split_path)
    held = set(split.heldout_ids)
    for t in trajs:
        if t.id in held:
            link = into / t.subset / Path(t.source_path).name
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(Path(t.source_path).resolve())
    return sorted(held)


def read_records(run: Path) -> list[CaseRecord]:
    """The records a variant's run holds (its finished file, or the partial file of an interrupted job)."""
    rows: dict[str, CaseRecord] = {}
    for name in ("predictions.jsonl", PARTIAL):
        path = run / name
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = CaseRecord.model_validate_json(line)
                    rows[rec.id] = rec
    return list(rows.values())


def _cell(hits: list[bool]) -> dict[str, Any]:
    k, n = sum(hits), len(hits)
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": k / n if n else None, "wilson95": [lo, hi]}


def _fmt(c: dict[str, Any]) -> str:
    if not c["n"]:
        return "-"
    return f"{c['k']}/{c['n']} = {c['rate']:.2f} [{c['wilson95'][0]:.2f}, {c['wilson95'][1]:.2f}]"


SUBSETS = ("algorithm_generated", "hand_crafted")


def summarize(runs: dict[str, Path], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Per variant and subset the accuracies with Wilson intervals and costs; per pair the paired comparison."""
    out: dict[str, Any] = {"variants": {}, "pairs": {}}
    done: dict[str, dict[str, CaseRecord]] = {}
    for name, run in runs.items():
        recs = [r for subset in SUBSETS for r in read_records(run / subset)]
        ok = [r for r in recs if r.error is None]
        done[name] = {r.id: r for r in ok}
        metrics = attribution_metrics(ok) if ok else {}
        out["variants"][name] = {"errors": sorted(r.id for r in recs if r.error is not None), "subsets": {}}
        for subset, m in metrics.items():
            part = [r for r in ok if subset in ("all", r.subset)]
            out["variants"][name]["subsets"][subset] = {
                "n": len(part),
                "agent": _cell([agent_correct(r.predicted_agent, r.gold_agent) for r in part if r.gold_agent]),
                "step": _cell([step_within(r.predicted_step, r.gold_step, 0) for r in part if r.gold_step is not None]),
                "mean_calls": m["mean_nfe"], "mean_tokens": m["mean_tokens"], "mean_seconds": m["mean_seconds"],
                "no_prediction": m["n_no_step"],
            }
    for a, b in pairs:
        common = sorted(set(done[a]) & set(done[b]))
        row: dict[str, Any] = {"n": len(common)}
        for what, right in (("agent", lambda r: agent_correct(r.predicted_agent, r.gold_agent)),
                            ("step", lambda r: step_within(r.predicted_step, r.gold_step, 0))):
            ra = [bool(right(done[a][i])) for i in common]
            rb = [bool(right(done[b][i])) for i in common]
            test = sign_test([float(x) - float(y) for x, y in zip(ra, rb, strict=True)])
            row[what] = {a: _cell(ra), b: _cell(rb), f"only_{a}": test.better, f"only_{b}": test.worse,
                         "sign_test_p": test.p_value}
        out["pairs"][f"{a} vs {b}"] = row
    return out


def print_table(summary: dict[str, Any]) -> None:
    print(f"{'variant':16s} {'subset':20s} {'n':>3s} {'err':>3s}  {'agent accuracy [95% Wilson]':30s} "
          f"{'step accuracy [95% Wilson]':30s} {'calls':>6s} {'tokens':>7s} {'s/rec':>6s} {'none':>4s}")
    for name, v in summary["variants"].items():
        for subset, m in v["subsets"].items():
            print(f"{name:16s} {subset:20s} {m['n']:3d} {len(v['errors']) if subset == 'all' else 0:3d}  "
                  f"{_fmt(m['agent']):30s} {_fmt(m['step']):30s} {m['mean_calls']:6.1f} {m['mean_tokens']:7.0f} "
                  f"{m['mean_seconds']:6.0f} {m['no_prediction']:4d}")
        if not v["subsets"]:
            print(f"{name:16s} {'(no finished record)':20s}")
    for label, row in summary["pairs"].items():
        a, b = label.split(" vs ")
        print(f"\n{label}, on the {row['n']} record(s) both finished:")
        for what in ("agent", "step"):
            r = row[what]
            print(f"  {what:5s} {a}: {_fmt(r[a])}; {b}: {_fmt(r[b])}; right only by {a}: {r[f'only_{a}']}, "
                  f"only by {b}: {r[f'only_{b}']}; exact sign test p = {r['sign_test_p']:.3f}")


def pairs_of(variants: dict[str, tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """(paper, project) variants of one method."""
    by_method: dict[str, dict[str, str]] = {}
    for name, (method, opts) in variants.items():
        by_method.setdefault(method, {})[str(opts.get("variant", "paper"))] = name
    return [(v["paper"], v["project"]) for v in by_method.values() if "paper" in v and "project" in v]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="working directory (records, runs, summary.json)")
    ap.add_argument("--model", default=None, help="route name (embedded, scripted, or one of --config)")
    ap.add_argument("--config", default=None, help="experiment TOML holding the route")
    ap.add_argument("--variant", action="append", metavar="NAME=METHOD[:KEY=VALUE,...]",
                    help=f"a method with its options (repeatable; default: {', '.join(DEFAULT_VARIANTS)})")
    ap.add_argument("--minutes", type=float, default=60.0, help="start no job after this much wall time (default 60)")
    ap.add_argument("--max-records", type=int, default=None, help="at most this many records per subset and variant")
    ap.add_argument("--subset", choices=["all", "algorithm_generated", "hand_crafted"], default="all")
    ap.add_argument("--concurrency", type=int, default=1, help="records at once within a job (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--without-ground-truth", action="store_true", help="never show the models the correct answer")
    ap.add_argument("--report-only", action="store_true", help="print the table of what OUT holds; run nothing")
    ap.add_argument("--dev-dir", type=Path, default=DEV, help="the Who&When dev split")
    ap.add_argument("--split", type=Path, default=SPLIT, help="the recorded held-out split")
    args = ap.parse_args(argv)
    try:
        variants = {name: (method, opts) for name, method, opts in map(parse_variant, args.variant or DEFAULT_VARIANTS)}
        runs = {name: args.out / "runs" / name for name in variants}
        if not args.report_only:
            if args.model is None:
                raise UserError("--model: a route is needed to run (e.g. --model embedded); or pass --report-only")
            if args.minutes <= 0 or (args.max_records is not None and args.max_records < 1):
                raise UserError("--minutes must be > 0 and --max-records >= 1")
            held = link_heldout(args.dev_dir, args.split, args.out / "heldout")
            subsets = [s for s in SUBSETS if args.subset in ("all", s)]
            sizes = {s: sum(1 for i in held if i.startswith(s + "/")) for s in subsets}
            rounds = min(max(sizes.values()), args.max_records or max(sizes.values()))
            start = time.monotonic()
            stopped = False
            for r in range(1, rounds + 1):
                for subset in [s for s in subsets if sizes[s] >= r]:
                    for name, (method, opts) in variants.items():
                        if time.monotonic() - start >= args.minutes * 60:
                            stopped = True
                            break
                        job = AttributeJob(method=method, method_options=opts, data_dir=str(args.out / "heldout"),
                                           out=str(runs[name] / subset), max_cases=r, subset=subset,
                                           model=args.model, config=args.config, seed=args.seed,
                                           concurrency=args.concurrency, with_ground_truth=not args.without_ground_truth)
                        run_attribute_job(job)
                    if stopped:
                        break
                if stopped:
                    break
            print(f"ran {'until the time limit' if stopped else f'{rounds} round(s)'} in "
                  f"{(time.monotonic() - start) / 60:.1f} min")
    except UserError as err:
        print(f"eval_fidelity_heldout: {err}", file=sys.stderr)
        return 2
    summary = summarize(runs, pairs_of(variants))
    summary["load_average"] = list(os.getloadavg())
    summary["settings"] = {"model": args.model, "config": args.config, "seed": args.seed,
                           "with_ground_truth": not args.without_ground_truth,
                           "variants": {n: {"method": m, "options": o} for n, (m, o) in variants.items()}}
    print_table(summary)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "summary.json", summary)
    print(f"wrote {args.out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
