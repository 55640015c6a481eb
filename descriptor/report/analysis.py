"""The numbers on the report's index page, from per-run rows and task descriptors.

- Overview per benchmark x system: success over runs with a Wilson 95 %
  interval (runs treated as independent draws), completion, error rate (runs
  with at least one ``error`` event), tool error rate, mean tokens and USD
  per run, the summed model latency p95 (ms) by the summaries' rule (mean
  over tasks of each task's p95 of its runs' summed event latency: one
  figure in report and CSV) and the mean wall time per run (s).
- MAS vs baseline per benchmark: the :mod:`descriptor.economics` row (G, K,
  dU with their paired bootstrap intervals over tasks, reused as is), the
  per-task differences behind it, an exact sign test over tasks on the
  per-task success difference, and one sentence stating the finding.
- Compare: the same paired machinery between experiment roots, per
  benchmark x system, on the tasks both roots ran.
- Problems (benchmarks whose tasks are sub-steps of problems, SciCode):
  problem-level success beside sub-step success (:func:`problem_overview`).

Why the sign test over tasks and not McNemar over runs: the bootstrap
resamples tasks, so tasks are the unit of inference throughout; the runs of
one task share its difficulty (not independent pairs), and pairing run r of
one system with run r of another is arbitrary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import stdev
from typing import Any

from descriptor.economics import EconomicsSettings, compare_pair
from descriptor.judge_audit import ConsensusDigest, VoteDigest
from descriptor.power import detectable_effect
from descriptor.problems import problem_outcomes, rollup_problem_fields
from descriptor.stats import SignTest, bootstrap_mean_ci, p95, sign_test, wilson_interval
from descriptor.summaries import task_average

FEW_TASKS = 10
"""Below this many tasks a percentile bootstrap over tasks is too narrow to trust; the text says so."""


@dataclass(kw_only=True, slots=True)
class RunRow:
    """What the index needs of one run (the run's data file has the rest)."""

    benchmark: str
    system: str
    task_id: str
    run_index: int
    included: bool
    """False when the summaries skip the run (damaged or inconsistent files) or it is no task result (errored)."""
    errored: bool = False
    """The run ended in an infrastructure error: no task result, left out of every task metric as the summaries
    leave it out."""
    success: bool | None
    completion: bool | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    """The run's summed event latency (ms): parallel calls add up, so not its duration."""
    wall_time_s: float = 0.0
    """The run's duration (s)."""
    error_events: int = 0
    tool_calls: int = 0
    tool_fails: int = 0
    answer: str = ""
    href: str = ""
    """The run in the viewer, relative to the report directory."""
    flags: str = ""
    """Short marks for the grid cell (``R`` rolled back, ``A`` attributed)."""
    vote: VoteDigest | None = None
    """The run's last final vote (:func:`descriptor.judge_audit.vote_digest`)."""
    elections: list[VoteDigest] = field(default_factory=list)
    """Its elections (:func:`descriptor.judge_audit.election_digests`)."""
    candidate_success: list[bool] | None = None
    """The benchmark's verdict on each of that vote's candidates (``eval.json``), where it was recorded."""
    consensus: ConsensusDigest | None = None
    """The consensus decisions a judge model decided (:func:`descriptor.judge_audit.consensus_digest`)."""
    untargeted: bool = False
    """The run's task has tests that compare no expected value (``eval.json``'s ``tests_compare_no_target``):
    its success is marked (``U``), as it checks properties of the answer, not the reference's values."""

    @property
    def cls(self) -> str:
        """Outcome class of the run's links: ``skip`` (left out by the summaries), ``ok`` or ``fail``."""
        return "skip" if not self.included else "ok" if self.success else "fail"  # an errored run: skip too


def overview(rows: Sequence[RunRow], descriptors: Sequence[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """One row per benchmark x system over the included runs (see the module docstring)."""
    groups: dict[tuple[str, str], list[RunRow]] = {}
    for r in rows:
        if r.included:
            groups.setdefault((r.benchmark, r.system), []).append(r)
    out = []
    for (bench, system), rs in sorted(groups.items()):
        n, k = len(rs), sum(1 for r in rs if r.success)
        lo, hi = wilson_interval(k, n)
        calls = sum(r.tool_calls for r in rs)
        task_tokens = [d["C2_tokens_total"] for d in descriptors if d["benchmark"] == bench and d["system"] == system]
        t_lo, t_hi = bootstrap_mean_ci(task_tokens, seed=seed)
        out.append({
            "benchmark": bench, "system": system, "n_tasks": len({r.task_id for r in rs}), "n_runs": n,
            "n_success": k, "success": k / n, "success_lo": lo, "success_hi": hi,
            "completion": sum(1 for r in rs if r.completion) / n,
            "error_rate": sum(1 for r in rs if r.error_events) / n,
            "tool_error_rate": sum(r.tool_fails for r in rs) / calls if calls else None,
            "tokens": sum(r.tokens for r in rs) / n, "tokens_task_lo": t_lo, "tokens_task_hi": t_hi,
            "tokens_task_mean": sum(task_tokens) / len(task_tokens) if task_tokens else None,
            "cost_usd": sum(r.cost_usd for r in rs) / n,
            # the roll-up's latency_p95 (experiment_summary.csv): the seed's benchmark-level rule
            "latency_p95": task_average([d for d in descriptors if d["benchmark"] == bench and d["system"] == system],
                                        "C1_latency_p95"),
            "wall_time_s": sum(r.wall_time_s for r in rs) / n,
        })
    return out


def problem_overview(rows: Sequence[RunRow], descriptors: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per benchmark x system whose tasks are sub-steps of problems (:mod:`descriptor.problems`): problem-level
    success beside sub-step success. A problem is solved in run r when every sub-step passed in run r; the
    (problem, run) pairs of the complete problems are pooled for a Wilson 95 % interval, as runs are for sub-step
    success; problems with some sub-steps not run are named, not counted. ``untargeted_successes``: successful runs
    of sub-steps whose tests compare no target."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in descriptors:
        groups.setdefault((d["benchmark"], d["system"]), []).append(d)
    out = []
    for (bench, system), ds in sorted(groups.items()):
        outcomes = problem_outcomes(ds)
        if not outcomes:
            continue
        complete = [o for o in outcomes.values() if o.complete]
        n, k = sum(o.runs for o in complete), sum(o.solved for o in complete)
        lo, hi = wilson_interval(k, n) if n else (None, None)
        mine = [r for r in rows if r.included and r.benchmark == bench and r.system == system]
        sub_n, sub_k = len(mine), sum(1 for r in mine if r.success)
        s_lo, s_hi = wilson_interval(sub_k, sub_n) if sub_n else (None, None)
        rollup = rollup_problem_fields(ds)
        out.append({"benchmark": bench, "system": system, "n_problems": len(complete), "problem_runs": n,
                    "problem_solved": k, "problem_success": k / n if n else None, "problem_lo": lo, "problem_hi": hi,
                    "problem_success_rate": rollup["problem_success_rate"],
                    "sub_steps": sub_n, "sub_solved": sub_k, "sub_success": sub_k / sub_n if sub_n else None,
                    "sub_lo": s_lo, "sub_hi": s_hi,
                    "partial": [o.problem for o in outcomes.values() if not o.complete],
                    "untargeted_successes": sum(1 for r in mine if r.success and r.untargeted),
                    "untargeted_tasks": sorted({r.task_id for r in mine if r.untargeted})})
    return out


def _shared(descriptors: Sequence[dict[str, Any]], bench: str, a: str, b: str) -> list[tuple[dict, dict]]:
    """(a, b) descriptor pairs of the tasks both systems ran, by task id."""
    da = {d["task_id"]: d for d in descriptors if d["benchmark"] == bench and d["system"] == a}
    db = {d["task_id"]: d for d in descriptors if d["benchmark"] == bench and d["system"] == b}
    return [(da[t], db[t]) for t in sorted(da.keys() & db.keys())]


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def paired_rows(economics: Sequence[dict[str, Any]], descriptors: Sequence[dict[str, Any]],
                s: EconomicsSettings) -> list[dict[str, Any]]:
    """Each economics row (MAS vs baseline) with its per-task differences, sign test, token ratio and sentence."""
    out = []
    for e in economics:
        pairs = _shared(descriptors, e["benchmark"], e["system"], e["baseline"])
        tasks = [{"task_id": m["task_id"], "dq": m["Q1_success_rate"] - b["Q1_success_rate"],
                  "dtokens": m["C2_tokens_total"] - b["C2_tokens_total"], "dcost": s.cost(m) - s.cost(b),
                  "n_runs": (m["n_runs"], b["n_runs"])} for m, b in pairs]
        test = sign_test([t["dq"] for t in tasks], s.tie_tol)
        tok_m = sum(m["C2_tokens_total"] for m, _ in pairs) / len(pairs)
        tok_b = sum(b["C2_tokens_total"] for _, b in pairs) / len(pairs)
        row = {**e, "tasks": tasks, "sign": test, "tokens_mas": tok_m, "tokens_base": tok_b,
               "token_ratio": _ratio(tok_m, tok_b),
               "runs_per_task": sorted({n for t in tasks for n in t["n_runs"]})}
        # the sample standard deviation: the population one understates a small sample's spread, and with it the
        # smallest effect the comparison could detect
        sd = stdev([t["dq"] for t in tasks]) if len(tasks) > 1 else None
        # every task tied: the spread is unknown, not zero, so no detectable effect is claimed
        row["detectable_effect"] = detectable_effect(sd, len(tasks)) if sd else None
        row["sentence"] = finding_sentence(row)
        row["utility_sentence"] = utility_sentence(row)
        out.append(row)
    return out


def signed_points(x: float) -> str:
    """A difference in success rate as signed percentage points (``+33.3``)."""
    return f"{100 * x:+.1f}"


def times_text(r: float | None) -> str:
    """A token ratio as a multiple: ``1.5×``, ``12×``; words for an undefined one (``... the tokens`` follows)."""
    if r is None:
        return "an undefined multiple of"  # the baseline used no tokens
    return f"{r:.2g}×" if r < 10 else f"{r:.0f}×"


def finding_sentence(row: dict[str, Any]) -> str:
    """The plain-language finding of one MAS-vs-baseline row.

    >>> finding_sentence({"benchmark": "gsm8k", "system": "debate", "baseline": "sas", "n_shared_tasks": 50,
    ...     "G": 0.06, "G_ci_low": 0.02, "G_ci_high": 0.10, "token_ratio": 11.2, "runs_per_task": [3],
    ...     "sign": SignTest(better=9, worse=2, tied=39, p_value=0.065)})
    'On 50 gsm8k tasks (3 runs each), debate solves 6.0 points more than sas (95 % CI +2.0 to +10.0) at 11× the tokens; sign test over tasks: better on 9, worse on 2, tied on 39 (p = 0.065).'
    """
    n, g, lo, hi = row["n_shared_tasks"], row["G"], row["G_ci_low"], row["G_ci_high"]
    runs = row.get("runs_per_task") or []
    each = f" ({runs[0]} run{'s' if runs[0] != 1 else ''} each)" if len(runs) == 1 else ""
    where = f"On {n} {row['benchmark']} task{'s' if n != 1 else ''}{each}"
    sys, base, times = row["system"], row["baseline"], times_text(row.get("token_ratio"))
    t: SignTest = row["sign"]
    sign = f"sign test over tasks: better on {t.better}, worse on {t.worse}, tied on {t.tied} (p = {t.p_value:.2g})"
    if lo is None or hi is None or lo <= 0 <= hi:
        ci = "" if lo is None else f", 95 % CI {signed_points(lo)} to {signed_points(hi)}"
        text = (f"{where}, the difference in success between {sys} and {base} ({signed_points(g)} points{ci}) is not "
                f"distinguishable from zero; {sys} uses {times} the tokens of {base}; {sign}.")
    else:
        more = "more" if g > 0 else "fewer"
        text = (f"{where}, {sys} solves {abs(100 * g):.1f} points {more} than {base} (95 % CI {signed_points(lo)} to "
                f"{signed_points(hi)}) at {times} the tokens; {sign}.")
    if n < FEW_TASKS:
        text += f" With fewer than {FEW_TASKS} tasks the bootstrap interval is too narrow; trust the sign test."
    if (mde := row.get("detectable_effect")) is not None:
        text += (f" The smallest difference these {n} tasks could detect with 80 % power is {100 * mde:.1f} points"
                 " (paired normal approximation; `plan` sizes the next experiment).")
    return text


MATCHED_SAS = "sas_matched"
"""The compute-matched SAS (k samples and a vote; :mod:`mas.topologies.sas_matched`)."""


def matching_sentence(plain: dict[str, Any], matched: dict[str, Any]) -> str:
    """Whether a MAS's difference from the plain SAS survives against the SAS given the same budget.

    >>> matching_sentence({"system": "debate", "G_ci_low": 0.02, "G_ci_high": 0.1},
    ...                   {"system": "debate", "baseline": "sas_matched", "G": 0.0, "G_ci_low": -0.05,
    ...                    "G_ci_high": 0.05, "token_ratio": 1.1})
    'Against the compute-matched SAS (sas_matched, 1.1× the tokens), debate differs by +0.0 points (95 % CI -5.0 to +5.0): the gain over sas does not survive matching; spending alone buys it.'
    """
    lo, hi, g = matched["G_ci_low"], matched["G_ci_high"], matched["G"]
    ci = "" if lo is None else f" (95 % CI {signed_points(lo)} to {signed_points(hi)})"
    head = (f"Against the compute-matched SAS ({matched['baseline']}, {times_text(matched.get('token_ratio'))} the "
            f"tokens), {matched['system']} differs by {signed_points(g)} points{ci}")
    gained = plain.get("G_ci_low") is not None and plain["G_ci_low"] > 0
    if lo is not None and lo > 0:
        verdict = "the gain over sas survives matching" if gained else "it beats the SAS given the same budget"
    elif hi is not None and hi < 0:
        verdict = "the SAS given the same budget does better"
    else:
        verdict = ("the gain over sas does not survive matching; spending alone buys it" if gained
                   else "no difference is distinguishable at the same budget")
    return f"{head}: {verdict}."


def utility_sentence(row: dict[str, Any]) -> str:
    """What won per task, quality and utility said apart (cost losing is never quality losing)."""
    n = row["n_shared_tasks"]

    def count(share: float) -> int:
        return round(share * n)

    unit = "token" if row["cost_unit"] == "tokens" else "USD"
    return (f"Quality: {row['system']} better on {count(row['quality_win_share'])}, same on "
            f"{count(row['quality_tie_share'])}, worse on {count(row['quality_lose_share'])} of {n} tasks. "
            f"Utility U = success − λ·cost (λ = {row['lambda']:g} per {unit}): better on {count(row['win_share'])}, "
            f"tied on {count(row['tie_share'])}, worse on {count(row['lose_share'])}; a task lost on utility with "
            f"the same success is lost on cost, not quality.")


def compare_roots(primary: Sequence[dict[str, Any]], others: Sequence[tuple[str, Sequence[dict[str, Any]]]],
                  s: EconomicsSettings) -> list[dict[str, Any]]:
    """Per benchmark x system present in the primary and another root: the other root against the primary
    on shared tasks (G, K, dU intervals from :func:`descriptor.economics.compare_pair`, sign test)."""
    out = []
    for label, descs in others:
        for bench, system in sorted({(d["benchmark"], d["system"]) for d in [*primary, *descs]}):
            a = {d["task_id"]: d for d in primary if d["benchmark"] == bench and d["system"] == system}
            b = {d["task_id"]: d for d in descs if d["benchmark"] == bench and d["system"] == system}
            shared = sorted(a.keys() & b.keys())
            row: dict[str, Any] = {"root": label, "benchmark": bench, "system": system, "n_shared_tasks": len(shared),
                                   "only_primary": len(a.keys() - b.keys()), "only_other": len(b.keys() - a.keys())}
            if shared:
                e = compare_pair([b[t] for t in shared], [a[t] for t in shared], s)
                row.update({k: e[k] for k in ("Q_mas", "Q_sas", "C_mas", "C_sas", "G", "G_ci_low", "G_ci_high",
                                              "K", "K_ci_low", "K_ci_high", "dU", "dU_ci_low", "dU_ci_high")})
                row["sign"] = sign_test([b[t]["Q1_success_rate"] - a[t]["Q1_success_rate"] for t in shared], s.tie_tol)
            out.append(row)
    return out
