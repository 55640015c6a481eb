"""Per-task output files: descriptor.json/.csv, analysis.json, task_summary.json.

``analysis.json`` adds what a person debugging a system wants next to the
numbers: the evaluation summary, which stage (event type) and which actor
spent the most tokens and latency, and where the controller stopped loops
(``verify`` events of ``system:controller`` carrying ``payload.reason``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from descriptor.io import write_csv_atomic, write_derived_json
from descriptor.run_files import RunIssue, RunRecord
from descriptor.task_descriptor import DESCRIPTOR_FIELDS
from descriptor.trace_digest import merge_spend


def _top(groups: dict[str, dict[str, float]], field: str) -> str | None:
    """Name with the largest ``field`` (ties: alphabetical first); None when all are zero."""
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][field], kv[0]))
    return ranked[0][0] if ranked and ranked[0][1][field] > 0 else None


def build_analysis(runs: Sequence[RunRecord], descriptor: dict[str, Any], issues: Sequence[RunIssue]) -> dict[str, Any]:
    """The ``analysis.json`` object of one task."""
    by_stage = merge_spend([r.digest.by_stage for r in runs])
    by_actor = merge_spend([r.digest.by_actor for r in runs])
    stalls = [{"run_index": r.run_index, **s} for r in runs for s in r.digest.stalls]
    return {
        "evaluation": {
            "n_runs": len(runs),
            "success_rate": descriptor["eval_success_rate"],
            "completion_rate": descriptor["eval_completion_rate"],
            "avg_score": descriptor["eval_avg_score"],
            "runs": [
                {
                    "run_index": r.run_index,
                    "run_id": r.run_id,
                    # Both verdicts from eval.json, like eval_success_rate/eval_completion_rate above.
                    "success": r.eval_success,
                    "completion": r.eval_completion,
                    "score": r.eval_score,
                    "tokens_total": r.metrics.tokens_total,
                    "latency_total": r.metrics.latency_total,
                    "cost_total": r.metrics.cost_total,
                    "loop_score": r.metrics.loop_score,
                }
                for r in runs
            ],
        },
        # The descriptor itself is descriptor.json beside it (it was here too: a third of this file).
        "bottlenecks": {
            "by_stage": by_stage,
            "by_actor": by_actor,
            "top_stage_by_tokens": _top(by_stage, "tokens"),
            "top_stage_by_latency": _top(by_stage, "latency_ms"),
            "top_actor_by_tokens": _top(by_actor, "tokens"),
            "top_actor_by_latency": _top(by_actor, "latency_ms"),
        },
        "loop_stalls": {
            "count": len(stalls),
            "by_reason": dict(sorted(Counter(s["reason"] for s in stalls).items())),
            "by_actor": dict(sorted(Counter(str(s["after_actor"]) for s in stalls).items())),
            "by_stage": dict(sorted(Counter(str(s["stage"]) for s in stalls).items())),
            "events": stalls,
        },
        "issues": [i.model_dump() for i in issues],
    }


def task_summary(runs: Sequence[RunRecord], descriptor: dict[str, Any], issues: Sequence[RunIssue],
                 errored_runs: Sequence[int] = ()) -> dict[str, Any]:
    """The short ``task_summary.json`` object: identity, headline rates and what was left out (skipped runs,
    damaged traces, and runs that ended in an infrastructure error)."""
    keys = ("benchmark", "system", "task_id", "n_runs", "success_rate", "eval_avg_score", "tokens_total")
    out = {k: descriptor[k] for k in keys}
    out["completion_rate"] = descriptor["Q2_completion_rate"]
    out["cost_total"] = descriptor["C3_cost_total"]
    out["run_indices"] = [r.run_index for r in runs]
    out["skipped_runs"] = sorted({i.path for i in issues if not i.included})
    out["damaged_traces"] = [{"path": i.path, "line": i.line} for i in issues if i.kind == "damaged_trace"]
    out["n_errors"] = len(errored_runs)
    out["errored_run_indices"] = list(errored_runs)
    return out


TASK_FILES = ("descriptor.json", "descriptor.csv", "analysis.json", "task_summary.json")


def write_task_files(task_dir: Path, runs: Sequence[RunRecord], descriptor: dict[str, Any], issues: Sequence[RunIssue],
                     *, errored_runs: Sequence[int] = ()) -> None:
    """Write the four per-task files atomically into ``task_dir`` (``runs``: the finished runs only)."""
    write_derived_json(task_dir / "descriptor.json", descriptor, indent=None)
    write_csv_atomic(task_dir / "descriptor.csv", [descriptor], DESCRIPTOR_FIELDS)
    write_derived_json(task_dir / "analysis.json", build_analysis(runs, descriptor, issues), indent=None)
    write_derived_json(task_dir / "task_summary.json", task_summary(runs, descriptor, issues, errored_runs), indent=None)
