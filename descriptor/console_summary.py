"""What ``run`` and ``summarize-experiment`` print at the end: the roll-up table and one sentence per comparison.

The table (one row per benchmark x system, every figure from ``experiment_summary.csv``'s row): tasks, runs
finished, runs that ended in an infrastructure error, success rate, tokens per run, USD per run and the summed
model latency p95 (ms: the roll-up's ``latency_p95``, model time, not a duration), plus the rollback columns after
``run --rollback``. At a terminal's width nothing is cut (:mod:`descriptor.console_table`).

The sentence states each MAS-vs-baseline row of ``economics.json`` in words: runs solved by each, the mean per-task
difference in success with its paired bootstrap interval (G and its interval, as is), and the token ratio of the
report's comparison (:func:`descriptor.report.analysis.paired_rows`). U, G and K themselves are in the report and
``economics.csv``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from descriptor.console_table import Column

if TYPE_CHECKING:
    from rich.console import Console

    from descriptor.summaries import ExperimentSummary


def _fmt(v: object, spec: str) -> str:
    return "" if v is None else format(v, spec)


def _usd(v: float | None) -> str:
    """USD to the millionth, trailing zeros dropped (``0``, ``0.0125``, ``1.5``)."""
    if v is None:
        return ""
    text = f"{v:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def summary_columns(rollups: Sequence[dict[str, Any]]) -> list[Column]:
    """The console table's columns of the roll-ups (benchmark and system first: the key columns)."""
    def col(header: str, cells: Sequence[str], right: bool = True) -> Column:
        return Column(header=header, cells=tuple(cells), right=right)

    rs = list(rollups)
    columns = [
        col("benchmark", [str(r["benchmark"]) for r in rs], right=False),
        col("system", [str(r["system"]) for r in rs], right=False),
        col("tasks", [str(r["n_tasks"]) for r in rs]),
        col("runs", [str(r["n_runs"]) for r in rs]),
        col("errors", [str(r["n_errors"]) for r in rs]),
        col("success", [_fmt(r["success_rate"], ".3f") for r in rs]),
        col("tokens\nper run", [_fmt(r["tokens_total"], ",.0f") for r in rs]),
        col("USD\nper run", [_usd(r["cost_total"]) for r in rs]),
        col("latency\np95 (ms)", [_fmt(r["latency_p95"], ",.0f") for r in rs]),
    ]
    if any(r.get("success_after_rollback") is not None for r in rs):  # `run --rollback`: before, after, extra spend
        columns += [
            col("rolled\nback", [_fmt(r.get("rolled_back"), "d") for r in rs]),
            col("success after\nrollback", [_fmt(r.get("success_after_rollback"), ".3f") for r in rs]),
            col("+tokens\nper run", [_fmt(r.get("rollback_tokens"), ",.0f") for r in rs]),
            col("+USD\nper run", [_usd(r.get("rollback_cost_usd")) for r in rs]),
        ]
    return columns


KEY_COLUMNS = 2
"""benchmark and system: repeated in every table the columns are split into."""


def print_summary_table(summary: ExperimentSummary, console: Console, width: int | None = None) -> None:
    """The title line and the roll-up table(s) (:func:`descriptor.console_table.print_columns`)."""
    from descriptor.console_table import print_columns

    errors = f", {summary.n_errors} errored" if summary.n_errors else ""
    if summary.count_errors_as_failures:
        errors += ", errored runs counted as failures"
    # the path is never cut: a line of its own, for the terminal to wrap
    console.print(f"{summary.experiment_root} ({summary.n_runs} runs{errors})", soft_wrap=True, markup=False,
                  highlight=False)
    if summary.rollups:
        print_columns(console, summary_columns(summary.rollups), KEY_COLUMNS, width)


def _solved(descriptors: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(successful runs, finished runs) over ``descriptors``."""
    return sum(d["n_success"] for d in descriptors), sum(d["n_runs"] for d in descriptors)


def comparison_sentence(row: dict[str, Any], mas: Sequence[dict[str, Any]], base: Sequence[dict[str, Any]]) -> str:
    """One MAS-vs-baseline comparison in a sentence: ``row`` is :func:`~descriptor.report.analysis.paired_rows`'
    (the economics row with its token ratio), ``mas`` and ``base`` the two systems' descriptors of the shared tasks.

    >>> row = {"benchmark": "gsm8k", "system": "debate", "baseline": "sas", "n_shared_tasks": 12, "G": 1 / 3,
    ...        "G_ci_low": 0.0, "G_ci_high": 2 / 3, "token_ratio": 7.04}
    >>> comparison_sentence(row, [{"n_success": 4, "n_runs": 6}], [{"n_success": 2, "n_runs": 6}])
    'gsm8k: debate solved 4/6 runs vs sas 2/6 (+33.3 points, 95 % CI +0.0 to +66.7 over 12 tasks) at 7× the tokens.'
    """
    from descriptor.report.analysis import FEW_TASKS, signed_points, times_text

    (k_m, n_m), (k_b, n_b) = _solved(mas), _solved(base)
    n, lo, hi = row["n_shared_tasks"], row["G_ci_low"], row["G_ci_high"]
    tasks = f"{n} task{'s' if n != 1 else ''}"
    if lo is None or hi is None:
        ci = f"no interval over {tasks}"
    else:
        ci = f"95 % CI {signed_points(lo)} to {signed_points(hi)} over {tasks}"
        if n < FEW_TASKS:  # the report's rule: a percentile bootstrap over so few tasks is too narrow
            ci += ", too few to trust"
    return (f"{row['benchmark']}: {row['system']} solved {k_m}/{n_m} runs vs {row['baseline']} {k_b}/{n_b} "
            f"({signed_points(row['G'])} points, {ci}) at {times_text(row.get('token_ratio'))} the tokens.")


def comparison_sentences(summary: ExperimentSummary) -> list[str]:
    """:func:`comparison_sentence` for every economics row of ``summary``."""
    if not summary.economics:
        return []
    from descriptor.economics import EconomicsSettings
    from descriptor.report.analysis import paired_rows

    e = summary.economics[0]
    settings = EconomicsSettings.for_unit(e["cost_unit"], lam=e["lambda"], baseline=e["baseline"])
    out = []
    for row in paired_rows(summary.economics, summary.descriptors, settings):
        shared = {t["task_id"] for t in row["tasks"]}

        def of(system: str, row: dict[str, Any] = row, shared: set[str] = shared) -> list[dict[str, Any]]:
            return [d for d in summary.descriptors if d["benchmark"] == row["benchmark"] and d["system"] == system
                    and d["task_id"] in shared]

        out.append(comparison_sentence(row, of(row["system"]), of(row["baseline"])))
    return out


def print_summary(summary: ExperimentSummary) -> None:
    """Warnings (to stderr), the benchmark x system table of the roll-ups and one sentence per comparison.

    Nothing is cut: on a terminal the table fits its width (split into several tables when it must); off one (a
    log, a pipe) it is one table as wide as its content (rich would otherwise fit it into 80 columns with "…").
    """
    from rich.console import Console

    for issue in summary.issues:  # plain print: one unwrapped line per issue, easy to grep
        print(issue.warning().replace("warning: ", f"warning: {summary.experiment_root}/", 1), file=sys.stderr)
    for note in summary.notes:
        print(f"warning: {note}", file=sys.stderr)
    terminal = sys.stdout.isatty()
    console = Console(highlight=False, width=None if terminal else 10_000)
    print_summary_table(summary, console, width=console.width if terminal else None)
    for line in error_rate_warnings(summary.rollups):
        print(line, file=sys.stderr)
    for r in summary.rollups:  # budgets reached: finished runs, counted in every rate, named here
        if hits := r.get("limits_hit"):
            said = ", ".join(f"{n} at limits.{kind}" for kind, n in hits.items())
            print(f"{r['benchmark']}/{r['system']}: runs stopped by a budget: {said}")
    for sentence in comparison_sentences(summary):  # wrapped at words on a terminal, one line in a log
        console.print(sentence, markup=False)


def error_rate_warnings(rollups: list[dict[str, object]]) -> list[str]:
    """One warning per benchmark whose systems differ in their rate of errored runs (infrastructure failures).

    Success rates are over finished runs only; when one system lost more runs
    to errors than another, the two rates rest on different sets of tasks and
    draws, so the comparison is weaker than it looks.
    """
    by_bench: dict[str, list[dict[str, object]]] = {}
    for r in rollups:
        by_bench.setdefault(str(r["benchmark"]), []).append(r)
    out = []
    for bench, rows in sorted(by_bench.items()):
        if len({r["error_rate"] for r in rows}) > 1:
            rates = ", ".join(f"{r['system']} {_fmt(r['error_rate'], '.3f')}" for r in rows)
            out.append(f"warning: {bench}: systems differ in their error rate ({rates}); success rates count "
                       "finished runs only, so they compare different sets of runs: run the sweep again to "
                       "retry the errored runs")
    return out
