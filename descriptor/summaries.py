"""Rebuild every descriptor file of an experiment from its run files alone.

Layout read: ``<root>/<benchmark>/<system>/<task_id>/run_<r>.{trace.jsonl,eval.json,result.json}``.
Written (atomically, deterministically, so a rerun is byte-identical):

- per task: ``descriptor.json/.csv``, ``analysis.json``, ``task_summary.json``;
- per system: ``<root>/<benchmark>/<system>/summary.json/.csv`` (one row per task);
- per benchmark: ``<root>/<benchmark>/summary.json/.csv`` (one roll-up row per system, the best system);
- at the root: ``experiment_summary.json/.csv`` (benchmark x system roll-ups),
  ``economics.json/.csv``, ``topology.json`` and ``plots/*.svg``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from descriptor.calibration import rollup_calibration
from descriptor.economics import EconomicsSettings, compute_economics, write_economics
from descriptor.errors import UserError
from descriptor.io import json_bytes, write_csv_atomic, write_derived_json
from descriptor.layout import (
    SUFFIXES,
    SUMMARY_CACHE_NAME,
    find_task_dirs,
    is_rollback_record,
)
from descriptor.parallel import PARALLEL_MIN_TASKS, fork_map, usable_workers
from descriptor.plots import PLOT_FILES, write_plots
from descriptor.rollback_summary import (
    ROLLBACK_FIELDS,
    rolled_back_experiment,
    rollup_rollback_fields,
    task_rollback_fields,
)
from descriptor.problems import ROLLUP_FIELDS as PROBLEM_ROLLUP_FIELDS
from descriptor.problems import TASK_FIELDS as PROBLEM_TASK_FIELDS
from descriptor.problems import rollup_problem_fields, task_problem_fields
from descriptor.provenance import price_notes, provenance_notes
from descriptor.run_files import RunIssue, RunRecord, load_task_runs
from descriptor.stats import mean
from descriptor.task_descriptor import (
    DESCRIPTOR_FIELDS,
    PASS_AT_K,
    check_consistency,
    compute_task_descriptor,
)
from descriptor.task_files import TASK_FILES, write_task_files
from descriptor.topology_analysis import analyse_topology
from descriptor.untrusted import BadJson, parse_json

ROLLUP_FIELDS: tuple[str, ...] = (
    "benchmark", "system", "n_tasks", "n_runs", "n_errors", "error_rate", "success_rate", "completion_rate",
    "eval_avg_score", "calibration_error",
    "tokens_total", "cost_total", "latency_p95", "tool_calls_total", "communication_count", "handoff_count",
    *(f"pass_at_{k}" for k in PASS_AT_K), "stability", "tokens_cv", "cost_per_success",
    *PROBLEM_ROLLUP_FIELDS,
    *ROLLBACK_FIELDS,
)
SYSTEM_SUMMARY_FIELDS: tuple[str, ...] = (*DESCRIPTOR_FIELDS, *PROBLEM_TASK_FIELDS)
"""Columns of a system's ``summary.csv``: the task descriptor, then the task's problem and that problem's success
rate beside the sub-step's (blank for tasks that are no sub-step; :mod:`descriptor.problems`)."""
# Roll-up field -> descriptor field it averages over tasks.
_AVERAGED = {
    "success_rate": "Q1_success_rate",
    "completion_rate": "Q2_completion_rate",
    "eval_avg_score": "eval_avg_score",
    "tokens_total": "C2_tokens_total",
    "cost_total": "C3_cost_total",
    "latency_p95": "C1_latency_p95",
    "tool_calls_total": "C4_tool_calls_total",
    "communication_count": "D2_communication_count",
    "handoff_count": "D3_handoff_count",
    **{f"pass_at_{k}": f"pass_at_{k}" for k in PASS_AT_K},
    "stability": "stability",
    "tokens_cv": "tokens_cv",
}


CACHE_VERSION = 5
"""Bump when a task descriptor's definition changes: cached descriptors are then recomputed."""
PLOTS_KEY = "plots"
_FINGERPRINTED = tuple(SUFFIXES[k] for k in ("result", "eval", "trace", "trace_metrics"))
"""The run files a task's descriptor is read from: ``trace_metrics.json`` too, which stands for an unchanged trace
(a summary from the cache and one without it must read the same files)."""


class ExperimentSummary(BaseModel):
    """What ``summarize-experiment`` rebuilt."""

    experiment_root: str
    rollups: list[dict[str, Any]]
    """One row per benchmark x system (keys :data:`ROLLUP_FIELDS`)."""
    descriptors: list[dict[str, Any]]
    """Every task descriptor, sorted by benchmark, system, task."""
    economics: list[dict[str, Any]]
    issues: list[RunIssue]
    """Skipped runs and damaged trace lines."""
    notes: list[str] = []
    """The runs ran with more than one config or version of the code (:mod:`descriptor.provenance`)."""
    n_runs: int
    n_errors: int = 0
    """Runs that ended in an infrastructure error: counted per system, left out of every other number."""
    count_errors_as_failures: bool = False
    """Errored runs were counted as finished runs with completion and success 0 (``n_errors`` is then 0)."""


def task_average(descriptors: Sequence[dict[str, Any]], key: str) -> float | None:
    """The roll-up of ``key``: its mean over tasks; blank when any task has it blank (averaging a subset would
    compare different task sets) or there is no task. The report's experiment-level figures use it too."""
    values = [d[key] for d in descriptors]
    return None if not values or any(v is None for v in values) else mean(values)


def rollup(descriptors: Sequence[dict[str, Any]], benchmark: str, system: str, n_errors: int = 0) -> dict[str, Any]:
    """Task-averaged roll-up of one system's descriptors, with its ``n_errors`` errored runs beside them.

    A field that is blank for any task is blank in the roll-up (averaging a
    subset would compare different task sets); every field is blank when no
    run finished. ``cost_per_success`` is recomputed from the roll-up:
    tokens_total / success_rate. ``error_rate`` = errored runs / all runs. ``calibration_error``: over every
    run whose answer stated a confidence (:mod:`descriptor.calibration`), blank when none did.
    """
    n_runs = sum(d["n_runs"] for d in descriptors)
    row: dict[str, Any] = {"benchmark": benchmark, "system": system, "n_tasks": len(descriptors), "n_runs": n_runs,
                           "n_errors": n_errors,
                           "error_rate": n_errors / (n_runs + n_errors) if n_runs + n_errors else None}
    limited: Counter[str] = Counter()
    for d in descriptors:
        limited.update(d.get("limits_hit") or {})
    if limited:  # runs a budget (config ``limits``) stopped, by limit; absent when none did
        row["limits_hit"] = dict(sorted(limited.items()))
    for out_key, key in _AVERAGED.items():
        row[out_key] = task_average(descriptors, key)
    ok = row["success_rate"] is not None and row["success_rate"] > 0
    row["cost_per_success"] = row["tokens_total"] / row["success_rate"] if ok else None
    row["calibration_error"] = rollup_calibration(descriptors)  # blank unless answers state confidences
    row.update(rollup_problem_fields(descriptors))  # blank unless the tasks are sub-steps of problems
    row.update(rollup_rollback_fields(descriptors))  # blank unless the sweep was rolled back
    return row


def task_fingerprint(task_dir: Path, rolled_back: bool = False, count_errors: bool = False) -> str:
    """What a task's descriptor depends on: its run files' names, sizes and modification times, its rollback
    records' (the rollback fields), whether the experiment was rolled back (``rolled_back``) and whether errored
    runs count as failures (``count_errors``).

    Finished run files never change (``result.json`` is written last), so
    a task whose fingerprint is unchanged has an unchanged descriptor; a run
    redone (an error retried), a new rollback or a file damaged by hand changes it.
    """
    entries = []
    for p in task_dir.iterdir():
        rollback = ".rollback_" in p.name
        if p.name.startswith("run_") and (is_rollback_record(p.name) if rollback else p.name.endswith(_FINGERPRINTED)):
            st = p.stat()
            entries.append((p.name, st.st_size, st.st_mtime_ns))
    derived = tuple((task_dir / name).exists() for name in TASK_FILES)
    return hashlib.sha256(repr((CACHE_VERSION, sorted(entries), derived, rolled_back,
                                count_errors)).encode()).hexdigest()[:32]


def _describe_task(root: Path, task_dir: Path, *, rolled_back: bool, count_errors: bool = False,
                   read: tuple[list[RunRecord], list[RunIssue]] | None = None) -> Described:
    """(descriptor of the finished runs or None, issues, finished runs, errored runs) of one task.

    ``count_errors``: the seed's literal rule, an errored run is a finished one with completion and success 0.
    ``read``: the task's runs as ``load_task_runs(events=False)`` returned them, when the caller read them.
    """
    identity = (task_dir.parent.parent.name, task_dir.parent.name, task_dir.name)
    # the traces' digests do, without the events
    records, found = read if read is not None else load_task_runs(task_dir, identity, events=False)
    # An infrastructure error is no task result: counted, and left out of every task metric (unless asked).
    runs = [r for r in records if count_errors or r.status != "error"]
    errored = [r.run_index for r in records if not count_errors and r.status == "error"]
    # Paths relative to the root keep the written files identical wherever the tree lives.
    found = [i.model_copy(update={"path": str(Path(i.path).relative_to(root))}) for i in found]
    if not runs:
        return None, found, 0, len(errored)
    d = compute_task_descriptor(runs, benchmark=identity[0], system=identity[1], task_id=identity[2])
    d.update(task_rollback_fields(runs, enabled=rolled_back))
    if limited := Counter(r.result.limit for r in runs if r.result.limit):  # only where a budget stopped a run
        d["limits_hit"] = dict(sorted(limited.items()))
    check_consistency(d, str(task_dir))
    write_task_files(task_dir, runs, d, found, errored_runs=errored)
    return d, found, len(runs), len(errored)


def _describe_new_task(root: Path, task_dir: Path, *, rolled_back: bool, count_errors: bool = False,
                       read: tuple[list[RunRecord], list[RunIssue]] | None = None) -> tuple[Described, str]:
    """:func:`_describe_task` and the task's fingerprint, taken after its task files were written (by the worker
    that wrote them: in the parent, one task after another, it was a serial share of a large summary)."""
    described = _describe_task(root, task_dir, rolled_back=rolled_back, count_errors=count_errors, read=read)
    return described, task_fingerprint(task_dir, rolled_back, count_errors)


def _describe_tasks(root: Path, cache: dict[str, Any], count_errors: bool = False,
                    reader: Reader | None = None, meanwhile: Callable[[], object] | None = None,
                    ) -> tuple[list[dict[str, Any]], list[RunIssue], int, dict[tuple[str, str], int]]:
    """Every task's descriptor, the issues, the finished runs and the errored runs per (benchmark, system); a
    task whose run files are unchanged since the last summary is not re-read.

    ``cache`` maps a task directory (relative to the root) to its fingerprint, issues and run counts from the
    last summary; it is updated in place. ``reader``, ``meanwhile``: see :func:`summarize_experiment`.
    """
    descriptors: list[dict[str, Any]] = []
    issues: list[RunIssue] = []
    n_runs = 0
    errors: dict[tuple[str, str], int] = {}
    seen = set()
    rolled_back = rolled_back_experiment(root)
    task_dirs = find_task_dirs(root)
    hits = {}
    for task_dir in task_dirs:
        rel = str(task_dir.relative_to(root))
        seen.add(rel)
        if (hit := _cached(task_dir, cache.get(rel), rolled_back, count_errors)) is not None:
            hits[task_dir] = hit
    misses = [t for t in task_dirs if t not in hits]
    describe = partial(_describe_new_task, root, rolled_back=rolled_back, count_errors=count_errors)
    if reader is not None:
        described = reader(lambda task_dir, records, found: describe(task_dir, read=(records, found)), misses)
    else:
        workers = usable_workers() if len(misses) >= PARALLEL_MIN_TASKS else 1
        described = dict(zip(misses, fork_map(describe, misses, workers=workers, meanwhile=meanwhile), strict=True))
    for task_dir in task_dirs:
        rel = str(task_dir.relative_to(root))
        if (hit := hits.get(task_dir)) is not None:
            d, found, n, n_err = hit
        else:
            (d, found, n, n_err), fingerprint = described[task_dir]
            cache[rel] = {"fingerprint": fingerprint, "issues": [i.model_dump() for i in found],
                          "n_runs": n, "n_errors": n_err}
        group = (task_dir.parent.parent.name, task_dir.parent.name)
        errors[group] = errors.get(group, 0) + n_err
        issues.extend(found)
        if d is not None:
            descriptors.append(d)
            n_runs += n
    for gone in set(cache) - seen:
        del cache[gone]
    return descriptors, issues, n_runs, errors


Described = tuple[dict[str, Any] | None, list[RunIssue], int, int]
Reader = Callable[[Callable[[Path, list[RunRecord], list[RunIssue]], Any], Sequence[Path]], dict[Path, Any]]
"""``reader(describe, task_dirs)``: reads every run of the experiment once for another purpose (the report), and
calls ``describe(task_dir, records, issues)`` for each of ``task_dirs`` as ``load_task_runs(events=False)`` read
it; returns what each call returned, by task directory."""


class _CacheEntry(BaseModel):
    """One task in the summaries' cache (validated: a damaged cache only costs a re-read)."""

    fingerprint: str
    issues: list[RunIssue]
    n_runs: int
    n_errors: int


def _cached(task_dir: Path, entry: Any, rolled_back: bool, count_errors: bool) -> Described | None:
    """What :func:`_describe_task` would return for a task whose run files are unchanged since the cached
    summary, else None (also when the cache entry or the task's ``descriptor.json`` is damaged: read again)."""
    try:
        hit = _CacheEntry.model_validate(entry)
    except ValidationError:
        return None
    if hit.fingerprint != task_fingerprint(task_dir, rolled_back, count_errors):
        return None
    d = None
    if hit.n_runs:
        try:
            d = parse_json((task_dir / "descriptor.json").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, BadJson):
            return None
        identity = (task_dir.parent.parent.name, task_dir.parent.name, task_dir.name)
        if not (isinstance(d, dict) and (d.get("benchmark"), d.get("system"), d.get("task_id")) == identity
                and set(DESCRIPTOR_FIELDS) <= d.keys()):
            return None
    return d, hit.issues, hit.n_runs, hit.n_errors


def _read_cache(root: Path) -> dict[str, Any]:
    try:
        cache = parse_json((root / SUMMARY_CACHE_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, BadJson):
        return {}
    ok = isinstance(cache, dict) and cache.get("version") == CACHE_VERSION and isinstance(cache.get("tasks", {}), dict)
    return cache if ok else {}


def _write_system_summaries(root: Path, descriptors: list[dict[str, Any]],
                            errors: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key, n in errors.items() if n}
    for d in descriptors:
        groups.setdefault((d["benchmark"], d["system"]), []).append(d)
    rollups = []
    for (benchmark, system), ds in sorted(groups.items()):
        row = rollup(ds, benchmark, system, errors.get((benchmark, system), 0))
        rollups.append(row)
        sys_dir = root / benchmark / system
        tasks = task_problem_fields(ds)
        write_derived_json(sys_dir / "summary.json", {"benchmark": benchmark, "system": system, "rollup": row,
                                                      "tasks": tasks})
        write_csv_atomic(sys_dir / "summary.csv", tasks, SYSTEM_SUMMARY_FIELDS)
    return rollups


def _benchmark_blocks(rollups: Sequence[dict[str, Any]]) -> dict[str, Any]:
    blocks: dict[str, Any] = {}
    for row in rollups:
        b = blocks.setdefault(row["benchmark"], {"systems": {}})
        b["systems"][row["system"]] = row
    for b in blocks.values():
        rows = list(b["systems"].values())
        b["n_systems"] = len(rows)
        rated = [r for r in rows if r["success_rate"] is not None]
        b["best_system_by_success"] = (min(rated, key=lambda r: (-r["success_rate"], r["system"]))["system"]
                                       if rated else None)
        b["error_rates_differ"] = len({r["error_rate"] for r in rows}) > 1
    return blocks


def _write_benchmark_summaries(root: Path, blocks: dict[str, Any]) -> None:
    """``<root>/<benchmark>/summary.json/.csv``: each benchmark's roll-ups by system, beside its system folders."""
    for benchmark, block in blocks.items():
        write_derived_json(root / benchmark / "summary.json", {"benchmark": benchmark, **block})
        write_csv_atomic(root / benchmark / "summary.csv", list(block["systems"].values()), ROLLUP_FIELDS)


def summarize_experiment(
    experiment_root: str | Path,
    *,
    lam: float | None = None,
    cost_unit: str = "tokens",
    baseline: str | None = None,
    seed: int = 0,
    plots: bool = True,
    alongside: Callable[[], object] | None = None,
    count_errors_as_failures: bool = False,
    reader: Reader | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> ExperimentSummary:
    """Rebuild all task, system and experiment files under ``experiment_root``.

    ``lam``/``cost_unit``/``baseline``/``seed`` configure the economics (see
    :mod:`descriptor.economics`; ``baseline`` None: ``sas`` when present).
    Raises :class:`UserError` when the root is not a directory, holds no
    run result, or has no system named ``baseline``, and
    :class:`~descriptor.task_descriptor.PipelineError` when result and eval
    files disagree. ``alongside`` is called once the summary files and plots are written:
    the CLI writes the report there. ``count_errors_as_failures``: every
    run that ended in an infrastructure error counts as a finished run with
    completion and success 0 (the seed's literal rule, for a final table);
    by default such runs are left out of every metric and counted apart. ``reader``: a pass over the runs
    that another writer makes anyway (the report's, :meth:`descriptor.report.build.ReportBuild.read`), which
    reads the runs of the tasks to describe for both, so they are read once. ``meanwhile``: called while this
    function's own forked workers read the runs (not with a ``reader``, which has its own; see
    :func:`~descriptor.parallel.fork_chunks`).
    """
    root = Path(experiment_root)
    if not root.is_dir():
        raise UserError(f"--experiment-root {root}: not a directory (expected <root>/<benchmark>/<system>/<task_id>/)")
    return _summarize(root, plots, alongside, lam=lam, cost_unit=cost_unit, baseline=baseline, seed=seed,
                      count_errors=count_errors_as_failures, reader=reader, meanwhile=meanwhile)


def _summarize(root: Path, plots: bool, alongside: Callable[[], object] | None, *, lam: float | None,
               cost_unit: str, baseline: str | None, seed: int, count_errors: bool = False,
               reader: Reader | None = None, meanwhile: Callable[[], object] | None = None) -> ExperimentSummary:
    settings = EconomicsSettings.for_unit(cost_unit, lam=lam, baseline=baseline or "sas", seed=seed)
    cache = _read_cache(root)
    tasks = cache.setdefault("tasks", {})
    descriptors, issues, n_runs, errors = _describe_tasks(root, tasks, count_errors, reader, meanwhile)
    n_errors = sum(errors.values())
    if not descriptors and not n_errors:
        raise UserError(f"{root}: no finished run found (expected <benchmark>/<system>/<task_id>/run_<r>.result.json)")
    systems = {s for (_, s), n in errors.items() if n} | {d["system"] for d in descriptors}
    if baseline is not None and baseline not in systems:
        raise UserError(f"--baseline {baseline!r}: no such system under {root}; systems: {', '.join(sorted(systems))}")
    rollups = _write_system_summaries(root, descriptors, errors)
    economics = compute_economics(descriptors, settings) if descriptors else []
    write_economics(root, economics, settings)
    topology = analyse_topology(descriptors, settings) if descriptors else {}
    write_derived_json(root / "topology.json", topology)
    blocks = _benchmark_blocks(rollups)
    _write_benchmark_summaries(root, blocks)
    notes = provenance_notes(root) + price_notes(root)
    write_derived_json(root / "experiment_summary.json", {
        "n_runs": n_runs,
        "n_errors": n_errors,
        "count_errors_as_failures": count_errors,
        "n_task_descriptors": len(descriptors),
        "rollups": rollups,
        "benchmarks": blocks,
        "issues": [i.model_dump() for i in issues],
        "notes": notes,
    })
    write_csv_atomic(root / "experiment_summary.csv", rollups, ROLLUP_FIELDS)
    # The plots are redrawn only when what they show changed.
    plots_fp = hashlib.sha256(json_bytes([descriptors, rollups, topology, settings.model_dump()],
                                         sort_keys=True)).hexdigest()
    drawn = all((root / "plots" / name).is_file() for name in PLOT_FILES)
    if plots and descriptors and (cache.get(PLOTS_KEY) != plots_fp or not drawn):
        write_plots(root / "plots", descriptors, rollups, topology, settings)
        cache[PLOTS_KEY] = plots_fp
    if alongside is not None:
        alongside()
    cache["version"] = CACHE_VERSION
    write_derived_json(root / SUMMARY_CACHE_NAME, cache)
    return ExperimentSummary(experiment_root=str(root), rollups=rollups, descriptors=descriptors,
                             economics=economics, issues=issues, notes=notes, n_runs=n_runs, n_errors=n_errors,
                             count_errors_as_failures=count_errors)
