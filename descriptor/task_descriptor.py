"""Task-level Q/C/D/R/P descriptor of N runs of one task and system.

Rules (also in ``descriptor/README.md``): means are arithmetic means over
runs; variances are *population* variances (divide by N); the p95 is
numpy's ``linear`` method (Hyndman-Fan type 7; all in :mod:`descriptor.stats`); a blank is ``None`` in JSON
and an empty CSV cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from descriptor.calibration import PAIRS_KEY, run_pairs
from descriptor.errors import UserError
from descriptor.problems import run_problem_fields
from descriptor.run_files import RunRecord
from descriptor.stats import mean, p95, pvariance

PASS_AT_K: tuple[int, ...] = (1, 3, 5, 8)

# Column order of descriptor.csv / summary.csv rows.
IDENTITY_FIELDS = ("benchmark", "system", "task_id", "n_runs", "n_success")
Q_FIELDS = ("Q1_success_rate", "Q2_completion_rate")
C_FIELDS = ("C1_latency_p95", "C2_tokens_total", "C3_cost_total", "C4_tool_calls_total")
D_FIELDS = (
    "D1_tool_error_rate",
    "D2_communication_count",
    "D2_agent_to_agent_communication_count",
    "D2_system_mediated_communication_count",
    "D3_handoff_count",
)
R_FIELDS = ("R1_success_var", "R2_latency_var", "R3_tokens_var")
P_FIELDS = ("P1_steps_total", "P2_backtrack_rate", "P3_loop_score", "P4_verification_density")
EVAL_FIELDS = ("eval_avg_score", "eval_success_rate", "eval_completion_rate")
PAPER_FIELDS = (
    "success_rate",
    *(f"pass_at_{k}" for k in PASS_AT_K),
    "stability",
    "eval_avg_score",
    "tokens_total",
    "cost_per_success",
    "tokens_cv",
)
# Older column names kept so downstream readers keep working.
COMPAT_FIELDS = ("tool_calls_total", "tool_error_rate", "communication_count", "handoff_count")
DESCRIPTOR_FIELDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        IDENTITY_FIELDS + Q_FIELDS + C_FIELDS + D_FIELDS + R_FIELDS + P_FIELDS + EVAL_FIELDS + PAPER_FIELDS + COMPAT_FIELDS
    )
)




def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k); ``None`` (blank) when n < k.

    >>> pass_at_k(4, 1, 3)
    0.75
    >>> pass_at_k(4, 1, 5) is None
    True
    """
    if n < k:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _paper_fields(d: dict[str, Any], runs: Sequence[RunRecord]) -> dict[str, Any]:
    n = len(runs)
    c = sum(r.success for r in runs)
    tokens = [float(r.metrics.tokens_total) for r in runs]
    success_rate = d["Q1_success_rate"]
    tokens_mean = d["C2_tokens_total"]
    out: dict[str, Any] = {"success_rate": success_rate}
    for k in PASS_AT_K:
        out[f"pass_at_{k}"] = pass_at_k(n, c, k)
    out["stability"] = min(1.0, max(0.0, 1.0 - d["R1_success_var"] / 0.25)) if n >= 2 else None
    out["tokens_total"] = tokens_mean
    out["cost_per_success"] = tokens_mean / success_rate if success_rate > 0 else None
    out["tokens_cv"] = math.sqrt(pvariance(tokens)) / tokens_mean if n >= 2 and tokens_mean > 0 else None
    out["tool_calls_total"] = d["C4_tool_calls_total"]
    out["tool_error_rate"] = d["D1_tool_error_rate"]
    out["communication_count"] = d["D2_communication_count"]
    out["handoff_count"] = d["D3_handoff_count"]
    return out


def compute_task_descriptor(runs: Sequence[RunRecord], *, benchmark: str, system: str, task_id: str) -> dict[str, Any]:
    """The descriptor dict (keys :data:`DESCRIPTOR_FIELDS`) of ``runs`` (N >= 1).

    Raises ``ValueError`` on an empty run list: a task with no finished run
    has no descriptor.
    """
    if not runs:
        raise ValueError(f"{benchmark}/{system}/{task_id}: no finished runs to describe")
    m = [r.metrics for r in runs]
    success = [float(r.success) for r in runs]
    latency = [x.latency_total for x in m]
    tokens = [float(x.tokens_total) for x in m]
    calls = sum(x.tool_calls_total for x in m)
    d: dict[str, Any] = {
        "benchmark": benchmark,
        "system": system,
        "task_id": task_id,
        "n_runs": len(runs),
        "n_success": sum(r.success for r in runs),
        "Q1_success_rate": mean(success),
        "Q2_completion_rate": mean([float(r.completion) for r in runs]),
        "C1_latency_p95": p95(latency),
        "C2_tokens_total": mean(tokens),
        "C3_cost_total": mean([x.cost_total for x in m]),
        "C4_tool_calls_total": mean([float(x.tool_calls_total) for x in m]),
        "D1_tool_error_rate": sum(x.tool_fail_total for x in m) / calls if calls else None,
        "D2_communication_count": mean([float(x.communication_count) for x in m]),
        "D2_agent_to_agent_communication_count": mean([float(x.communication_agent_to_agent_count) for x in m]),
        "D2_system_mediated_communication_count": mean([float(x.communication_system_mediated_count) for x in m]),
        "D3_handoff_count": mean([float(x.handoff_count) for x in m]),
        "R1_success_var": pvariance(success),
        "R2_latency_var": pvariance(latency),
        "R3_tokens_var": pvariance(tokens),
        "P1_steps_total": mean([float(x.steps_total) for x in m]),
        "P2_backtrack_rate": mean([x.backtrack_rate for x in m]),
        "P3_loop_score": mean([x.loop_score for x in m]),
        "P4_verification_density": mean([x.verification_density for x in m]),
        "eval_avg_score": mean([r.eval_score for r in runs]),
        "eval_success_rate": mean([float(r.eval_success) for r in runs]),
        "eval_completion_rate": mean([float(r.eval_completion) for r in runs]),
    }
    d.update(_paper_fields(d, runs))
    out = {k: d[k] for k in DESCRIPTOR_FIELDS}
    # Only benchmarks that read a confidence out of the answer (BrowseComp) have these (descriptor.calibration).
    if (pairs := run_pairs((r.eval.details, r.eval_success) for r in runs)) is not None:
        out[PAIRS_KEY] = pairs
    # Only tasks that are sub-steps of a problem (SciCode) have these (descriptor.problems).
    out.update(run_problem_fields(runs))
    return out


class PipelineError(UserError):
    """Two parts of the pipeline disagree about the same runs (a bug or tampered files)."""


def check_consistency(d: dict[str, Any], where: str) -> None:
    """Raise :class:`PipelineError` unless Q1 equals the eval success rate and Q2 the eval completion rate.

    Both sides are means over the same runs; any difference means ``result.json``
    and ``eval.json`` disagree about some run.
    """
    for q, e in (("Q1_success_rate", "eval_success_rate"), ("Q2_completion_rate", "eval_completion_rate")):
        if not math.isclose(d[q], d[e], rel_tol=0.0, abs_tol=1e-12):
            raise PipelineError(
                f"{where}: {q}={d[q]!r} (from run_<r>.result.json) differs from {e}={d[e]!r} "
                f"(from run_<r>.eval.json); result and eval files disagree about some run"
            )
