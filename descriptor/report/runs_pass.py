"""The one pass over an experiment's task directories: read each run, write its data, keep a light row.

Events are dropped once a task's data file is written
(:mod:`descriptor.report.run_data`), so memory stays flat at 10,000 runs.
Large experiments are read by forked workers (:mod:`descriptor.parallel`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from descriptor.problems import UNTARGETED_KEY
from descriptor.parallel import PARALLEL_MIN_RUNS, PARALLEL_MIN_TASKS, fork_chunks, usable_workers
import descriptor.report.collect as collect
from descriptor.report.analysis import RunRow
from descriptor.report.attribution_inputs import AttributionIndex
from descriptor.report.render import Layout, run_name, write_file
from descriptor.report.run_data import task_js
from descriptor.report.run_page import reference, rollback_view, run_view
from descriptor.run_files import RunIssue, RunRecord, load_task_runs
from descriptor.task_descriptor import check_consistency, compute_task_descriptor


@dataclass(kw_only=True, slots=True)
class PassResult:
    """What the index needs from the pass: per-run rows, task descriptors, issue lines, a few facts."""

    rows: list[RunRow] = field(default_factory=list)
    descriptors: list[dict[str, Any]] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    tasks: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(benchmark, task) -> (expected answer, question) for the grid."""
    also: dict[Path, Any] = field(default_factory=dict)
    """Task directory -> what the pass's ``also`` function made of its runs (the summaries' descriptor)."""

    def extend(self, other: PassResult) -> None:
        self.rows += other.rows
        self.descriptors += other.descriptors
        self.issues += other.issues
        self.models |= other.models
        for k, v in other.tasks.items():
            self.tasks.setdefault(k, v)
        self.also.update(other.also)


@dataclass(kw_only=True, slots=True)
class Pages:
    """What writing the runs' data needs."""

    layout: Layout
    attribution: AttributionIndex


Also = Callable[[Path, list[RunRecord], list[RunIssue]], Any]
"""Called in the pass with a task directory and its runs as ``load_task_runs(events=False)`` read them."""


def _row(run: collect.RunData, page: str, attr: AttributionIndex) -> RunRow:
    rec = run.record
    # a pass on a task whose tests compare no expected value is marked (U): it checks properties, not values
    untargeted = rec is not None and rec.eval.details.get(UNTARGETED_KEY) is True
    flags = ("R" if run.rollbacks else "") + ("A" if run.key in attr.by_run else "") + (
        "U" if untargeted and rec is not None and rec.success else "")
    if rec is None:
        return RunRow(benchmark=run.benchmark, system=run.system, task_id=run.task_id, run_index=run.run_index,
                      included=False, success=None, href=page, flags=flags)
    m = rec.metrics
    errored = rec.status == "error"
    return RunRow(benchmark=run.benchmark, system=run.system, task_id=run.task_id, run_index=run.run_index,
                  included=not errored, errored=errored, success=rec.success, completion=rec.completion, tokens=m.tokens_total,
                  cost_usd=m.cost_total, latency_ms=m.latency_total,
                  wall_time_s=run.result.wall_time_s if run.result is not None else 0.0,
                  error_events=rec.digest.error_events,
                  tool_calls=m.tool_calls_total, tool_fails=m.tool_fail_total,
                  answer=run.answer[:200], href=page, flags=flags, vote=rec.digest.vote, elections=rec.digest.elections,
                  candidate_success=rec.eval.candidate_success, consensus=rec.digest.consensus, untargeted=untargeted)


def _write_task_data(task: collect.TaskRuns, pages: Pages) -> None:
    """One data file with the views of the task directory's runs and of their readable rollbacks."""
    td, layout = task.dir, pages.layout
    views = {}
    for run in task.runs:
        views[run_name(run.run_index)] = run_view(run, pages.attribution.by_run.get(run.key))
        for rb in run.rollbacks:
            if rb.events is not None:
                views[run_name(run.run_index, rb.index)] = rollback_view(run, rb)
    write_file(layout.data_file(td.benchmark, td.system, td.task_id),
               task_js((td.benchmark, td.system, td.task_id), layout.dir_rel(td.path), views))


def read_tasks(root: Path, task_dirs: Sequence[collect.TaskDir], pages: Pages | None,
               also: tuple[Also, frozenset[Path]] | None = None) -> PassResult:
    """Read ``task_dirs`` in order; with ``pages``, write every task directory's run data on the way.

    ``also``: (function, task directories): the function is called with each of those directories' runs,
    read once for both (:attr:`PassResult.also` keeps what it returns)."""
    out = PassResult()
    for td in task_dirs:
        read = None
        if also is not None and td.path in also[1]:
            read = load_task_runs(td.path, (td.benchmark, td.system, td.task_id), events=False)
            out.also[td.path] = also[0](td.path, *read)
        task = collect.load_task(td, root, read)
        out.issues += [i.warning().removeprefix("warning: ") for i in task.issues]
        # An infrastructure error is no task result: left out of every task metric, as the summaries leave it out.
        records = [r.record for r in task.runs if r.record is not None and r.record.status != "error"]
        if records:
            d = compute_task_descriptor(records, benchmark=td.benchmark, system=td.system, task_id=td.task_id)
            check_consistency(d, str(td.path))
            out.descriptors.append(d)
        for run in task.runs:
            rel = pages.layout.run_rel(run.benchmark, run.system, run.task_id, run.run_index) if pages else ""
            out.rows.append(_row(run, rel, pages.attribution if pages else AttributionIndex()))
            if run.metadata is not None:
                out.models.update(run.metadata.models.values())
            out.tasks.setdefault((run.benchmark, run.task_id), (reference(run), run.question[:300]))
        if pages is not None and task.runs:
            _write_task_data(task, pages)
    return out


def read_all(root: Path, task_dirs: Sequence[collect.TaskDir], pages: Pages | None,
             also: tuple[Also, frozenset[Path]] | None = None,
             meanwhile: Callable[[], object] | None = None) -> PassResult:
    """:func:`read_tasks` over ``task_dirs``, in :func:`usable_workers` processes for large experiments (or
    when ``also`` has as many task directories as the summaries' own rule forks for); ``meanwhile``: see
    :func:`~descriptor.parallel.fork_chunks`."""
    many = (sum(len(td.finished) for td in task_dirs) >= PARALLEL_MIN_RUNS
            or (also is not None and len(also[1]) >= PARALLEL_MIN_TASKS))
    out = PassResult()
    for part in fork_chunks(lambda part: read_tasks(root, part, pages, also), task_dirs,
                            workers=usable_workers() if many else 1, meanwhile=meanwhile):
        out.extend(part)
    return out


def read_experiment(root: Path, pages: Pages | None) -> PassResult:
    """:func:`read_all` over every task directory of ``root``."""
    return read_all(root, collect.scan(root), pages)
