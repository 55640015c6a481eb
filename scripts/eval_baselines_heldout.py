"""The Who&When baselines (all-at-once, step-by-step, binary search) on the held-out part of the dev split.

    python scripts/eval_baselines_heldout.py --model embedded [--out DIR] [--max-cases K] [--prompts paper]
        [--methods all_at_once,step_by_step,binary_search] [--method-option KEY=VALUE] [--config TOML]

The split is the project's fixed one (``scripts/who_and_when_dev_heldout.json``, checked against the data;
:mod:`attribution.conformal.heldout`): its 37 held-out records are linked into ``DIR/heldout`` and each method is
run there by the ``attribute`` job with the paper's prompts (``--prompts paper``, the default: appendix G) into
``DIR/<method>-<prompts>/`` (``predictions.jsonl``, ``results.json``). The job is resumable, so the same command
again runs only the cases not yet done, and a larger ``--max-cases`` (the first K records of each subset) adds
records. Prints, per method and subset, agent and step accuracy with Wilson 95 % intervals (each labelled record
one trial; a case with no prediction, as step-by-step makes when it flags no step, counts wrong and is counted),
tokens and seconds per case, and the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attribution.cli.attribute import parse_method_options  # noqa: E402
from attribution.conformal.heldout import check_split, link_records, read_split  # noqa: E402
from attribution.evaluate import CaseRecord, agent_correct  # noqa: E402
from attribution.jobs import AttributeJob, run_attribute_job  # noqa: E402
from attribution.sources.loaders import load_who_and_when_dir  # noqa: E402
from descriptor.errors import UserError  # noqa: E402
from descriptor.stats import wilson_interval  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPLIT = ROOT / "scripts" / "who_and_when_dev_heldout.json"
DEFAULT_DEV = Path(os.environ.get("MAS_ECON_SHARED_DATA") or ROOT.parent / "shared" / "data") / "who_and_when" / "dev"
METHODS = ("all_at_once", "step_by_step", "binary_search")


def rate(k: int, n: int) -> str:
    """``k/n = 0.xxx [lo, hi]`` with the Wilson 95 % interval; ``-`` without trials."""
    if not n:
        return "-"
    lo, hi = wilson_interval(k, n)
    return f"{k}/{n} = {k / n:.3f} [{lo:.2f}, {hi:.2f}]"


def table(method: str, prompts: str, records: list[CaseRecord]) -> list[str]:
    """The printed lines of one method's held-out records: every subset, then all of them."""
    lines = []
    for subset in (*sorted({r.subset for r in records}), "all"):
        part = [r for r in records if subset in ("all", r.subset)]
        agent = [agent_correct(r.predicted_agent, r.gold_agent) for r in part if r.gold_agent]
        step = [r.predicted_step is not None and r.predicted_step == r.gold_step for r in part
                if r.gold_step is not None]
        none = sum(1 for r in part if r.error is None and r.predicted_agent is None and r.predicted_step is None)
        errors = sum(1 for r in part if r.error)
        tokens = sum(r.tokens for r in part) / len(part)
        seconds = sum(r.seconds for r in part) / len(part)
        lines.append(f"{method:14s} {prompts:8s} {subset:20s} n={len(part):3d}  agent {rate(sum(agent), len(agent))}"
                     f"  step {rate(sum(step), len(step))}  no prediction {none}  errors {errors}"
                     f"  tokens/case {tokens:,.0f}  s/case {seconds:.1f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model route: embedded, scripted, or a [models.NAME] of --config")
    ap.add_argument("--config", default=None, help="experiment TOML with the model routes (default: built-ins)")
    ap.add_argument("--out", default="runs/baselines_heldout", help="working directory (default %(default)s)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default: all three)")
    ap.add_argument("--prompts", choices=("paper", "project"), default="paper",
                    help="the paper's prompts (appendix G, default) or the project's")
    ap.add_argument("--method-option", action="append", default=[], metavar="KEY=VALUE",
                    help="an option given to every method of --methods (repeatable; a method without it refuses it), "
                         "e.g. --methods step_by_step --method-option no_flag=heuristic")
    ap.add_argument("--max-cases", type=int, default=None, help="the first K held-out records of each subset")
    ap.add_argument("--without-ground-truth", action="store_true", help="never show the reference answer")
    ap.add_argument("--data", type=Path, default=DEFAULT_DEV,
                    help="the Who&When dev split (default: $MAS_ECON_SHARED_DATA/who_and_when/dev, else "
                         "../shared/data/who_and_when/dev beside the repository)")
    ap.add_argument("--concurrency", type=int, default=1, help="cases at once (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        if not methods or any(m not in METHODS for m in methods):
            raise UserError(f"--methods: expected some of {', '.join(METHODS)}, got {args.methods!r}")
        if args.max_cases is not None and args.max_cases < 1:
            raise UserError(f"--max-cases: expected a positive number, got {args.max_cases}")
        if not args.data.is_dir():
            raise UserError(f"--data {args.data}: not a directory (expected the Who&When dev split)")
        options = parse_method_options(args.method_option)
        trajs = load_who_and_when_dir(args.data, "all").trajectories
        split = read_split(SPLIT)
        check_split(split, trajs, SPLIT)
        out = Path(args.out)
        heldout = link_records(trajs, set(split.heldout_ids), out / "heldout")
        lines = []
        for method in methods:
            run_dir = out / f"{method}-{args.prompts}"
            run_attribute_job(AttributeJob(
                method=method, data_dir=str(heldout), out=str(run_dir), model=args.model, config=args.config,
                max_cases=args.max_cases, seed=args.seed, concurrency=args.concurrency,
                with_ground_truth=not args.without_ground_truth,
                method_options={**options, "prompts": args.prompts}))
            text = (run_dir / "predictions.jsonl").read_text(encoding="utf-8")
            lines += table(method, args.prompts, [CaseRecord.model_validate_json(line) for line in text.splitlines()])
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    first = f" (the first {args.max_cases} of each subset run)" if args.max_cases else ""
    print(f"held-out records of {SPLIT.name}: {len(split.heldout_ids)}{first}")
    print("\n".join(lines))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
