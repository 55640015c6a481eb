"""CLI commands of failure attribution: ``attribute`` and ``score-steps``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from descriptor.cliargs import positive_int
from descriptor.redact import redact


def _add_source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data-dir", help="Who&When directory (with algorithm_generated/ and/or hand_crafted/)")
    src.add_argument("--runs-dir", help="this project's runs (experiment root or task dir); failed runs are used")
    src.add_argument("--spans", help="OpenTelemetry spans of failed runs of any agent program: OTLP JSON (a "
                                     "collector's file exporter) or Phoenix's span export; a file or a directory")
    p.add_argument("--subset", choices=("algorithm_generated", "hand_crafted", "all"), default="all",
                   help="Who&When subset (default all)")
    p.add_argument("--max-cases", type=positive_int, default=None, help="keep the first N cases of each subset")
    p.add_argument("--labels", default=None,
                   help="labels.jsonl of label-failures (with --runs-dir): its decisive steps replace the runs' "
                        "labels; runs it does not label have none")
    p.add_argument("--model", default=None,
                   help="model route (embedded, scripted, or a [models.NAME] of --config); LLM methods need it")
    p.add_argument("--config", default=None, help="experiment TOML with the model routes (default: built-ins)")
    gt = p.add_mutually_exclusive_group()
    gt.add_argument("--with-ground-truth", dest="with_ground_truth", action="store_true", default=True,
                    help="methods may show the reference answer to the model (default)")
    gt.add_argument("--without-ground-truth", dest="with_ground_truth", action="store_false",
                    help="methods never see the reference answer")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--concurrency", type=positive_int, default=4, help="cases processed at once (default 4)")


def _source_kwargs(args: argparse.Namespace) -> dict[str, object]:
    return {"data_dir": args.data_dir, "runs_dir": args.runs_dir, "spans": args.spans, "subset": args.subset,
            "max_cases": args.max_cases, "labels": args.labels, "model": args.model, "config": args.config, "seed": args.seed,
            "with_ground_truth": args.with_ground_truth, "concurrency": args.concurrency}


def _job(cls: type, **kw: object) -> object:
    """Build a job's options; a bad value becomes a UserError naming the flag."""
    from pydantic import ValidationError

    from descriptor.errors import UserError

    try:
        return cls(**kw)
    except ValidationError as err:
        e = err.errors()[0]
        flag = "--" + str(e["loc"][0]).replace("_", "-") if e["loc"] else "arguments"
        raise UserError(f"{flag}: {e['msg']} (got {e.get('input')!r})") from None


def _fmt(x: object) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def parse_method_options(pairs: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` pairs as keyword options; values read as JSON (numbers, true/false), else as text.

    >>> parse_method_options(["vote=weighted_share", "k=5", "compare_votes=true"])
    {'vote': 'weighted_share', 'k': 5, 'compare_votes': True}
    """
    from descriptor.errors import UserError
    from descriptor.untrusted import BadJson, parse_json

    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--method-option: expected KEY=VALUE, got {pair!r}")
        try:
            out[key.strip()] = parse_json(value)
        except BadJson:
            out[key.strip()] = value
    return out


def _ci(ci: list[float] | None) -> str:
    """`` [0.21, 0.48]``: a Wilson 95 % interval as the printed line shows it (nothing when there is none)."""
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


def _source_inputs(args: argparse.Namespace) -> list[str | None]:
    """What a job reads: its source, labels, config and training data (never written over)."""
    return [args.data_dir, args.runs_dir, args.spans, args.labels, args.config, getattr(args, "train_dir", None)]


def _attribute(args: argparse.Namespace) -> int:
    from attribution.jobs import ATTRIBUTE_OUT, AttributeJob, run_attribute_job
    from descriptor.outputs import check_output

    check_output(args.out, ATTRIBUTE_OUT, inputs=_source_inputs(args))
    res = run_attribute_job(_job(AttributeJob, method=args.method, out=args.out,
                                 method_options=parse_method_options(args.method_option or []), **_source_kwargs(args)))
    for subset, m in res["metrics"].items():
        within = m["step_accuracy_within"]
        print(f"{subset:20s} n={m['n']:4d} agent={_fmt(m['agent_accuracy'])}{_ci(m.get('agent_accuracy_ci'))} "
              f"step={_fmt(m['step_accuracy'])}{_ci(m.get('step_accuracy_ci'))} "
              f"±1={_fmt(within['1'])} ±3={_fmt(within['3'])} ±5={_fmt(within['5'])} "
              f"tokens/case={_fmt(m['mean_tokens'])} s/case={_fmt(m['mean_seconds'])}"
              + (f" no prediction={m['n_no_prediction']} (counted wrong)" if m.get("n_no_prediction") else ""))
    for s in res["skipped_files"]:
        print(redact(f"skipped {s['path']}: {s['reason']}"))
    if res["excluded_training_records"]:
        print(f"left out {len(res['excluded_training_records'])} record(s) the method was built from "
              f"(see results.json excluded_training_records)")
    if res["n_resumed"]:
        print(f"kept {res['n_resumed']} case(s) finished by an earlier run into {args.out}")
    print(f"wrote {args.out}/predictions.jsonl and {args.out}/results.json")
    return 0


def _score_steps(args: argparse.Namespace) -> int:
    from attribution.jobs import SCORE_FILE, SCORE_METRICS, ScoreJob, run_score_job
    from descriptor.outputs import check_output

    check_output(args.out, SCORE_FILE, inputs=_source_inputs(args))
    check_output(f"{args.out}.metrics.json", SCORE_METRICS, flag="--out (metrics)", inputs=_source_inputs(args))
    res = run_score_job(_job(ScoreJob, scorer=args.scorer, out=args.out, train_dir=args.train_dir,
                                 folds=args.folds, **_source_kwargs(args)))
    for subset, m in res["metrics"].items():
        print(f"{subset:20s} n={m['n']:4d} top1={_fmt(m['top1_accuracy'])} auroc={_fmt(m['auroc'])} "
              f"auroc_within={_fmt(m['auroc_within'])} removal@80(in-sample)={_fmt(m['removal_at_80_in_sample'])} "
              f"nfe={_fmt(m['mean_nfe'])}")
    for s in res["skipped_files"]:
        print(redact(f"skipped {s['path']}: {s['reason']}"))
    if res["n_resumed"]:
        print(f"kept {res['n_resumed']} trajectory score(s) finished by an earlier run")
    print(f"wrote {args.out} and {args.out}.metrics.json")
    return 0


def _registered(kind: str) -> Callable[[str], str]:
    """An argparse ``type`` checking a method or scorer name against its registry when the option is parsed."""

    def check(value: str) -> str:
        from descriptor.errors import UserError

        try:
            if kind == "method":
                from attribution.methods import get_method

                get_method(value)
            else:
                from attribution.scorers import get_scorer

                get_scorer(value)
        except UserError as err:  # argparse prints it with the usage line and exits 2
            raise argparse.ArgumentTypeError(str(err)) from None
        return value

    return check


def attribute_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``attribute``'s parser (the method's name is checked when parsed: the registries import sklearn)."""
    p.description = ("Runs one attribution method on every failed trajectory and writes "
                     "OUT/predictions.jsonl (one case per line, with the labels) and "
                     "OUT/results.json (agent/step accuracy, ±1..±5, tokens, wall time, per subset). "
                     "Resumable: finished cases are kept in OUT as they finish, and the same "
                     "command again (or with a larger --max-cases) runs only the cases not yet done.")
    _add_source(p)
    p.add_argument("--method", required=True, type=_registered("method"),
                   help="attribution method: random, all_at_once, step_by_step, binary_search, echo, chief, learned "
                        "(learned needs --method-option train_dir=DIR), or one a plugin registers (--plugin MODULE; "
                        "an unknown name lists every registered one)")
    p.add_argument("--method-option", action="append", metavar="KEY=VALUE",
                   help="an option of the method (repeatable), e.g. echo's vote=weighted_share, "
                        "compare_votes=true; chief's graph=regex (see attribution/README.md)")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=_attribute)


def score_steps_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``score-steps``'s parser (the scorer's name is checked when parsed, as ``attribute``'s method)."""
    p.description = ("Writes one JSON object per trajectory: id, n_steps, step_scores (each in "
                     "[0, 1]), mistake_step, mistake_agent, nfe (plus subset, raw_scores, fold). "
                     "Trained scorers (position, learned) are cross-fitted: a record is never "
                     "scored by a model trained on it. Metrics go to OUT.metrics.json. "
                     "Model-based scorers are resumable: the same command keeps the "
                     "trajectories an interrupted run finished.")
    _add_source(p)
    p.add_argument("--scorer", required=True, type=_registered("scorer"),
                   help="step scorer: llm_naive, llm_roles, position, learned (see attribution/README.md)")
    p.add_argument("--train-dir", default=None,
                   help="extra labelled trajectories to train on (Who&When dir or runs dir); never scored")
    p.add_argument("--folds", type=int, default=5, help="cross-fitting folds (default 5)")
    p.add_argument("--out", required=True, help="score file (JSONL)")
    p.set_defaults(func=_score_steps)
