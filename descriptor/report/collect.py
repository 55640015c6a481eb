"""Every read of run files the report makes, in one place, through the run-record contract.

The runs come from :func:`descriptor.run_files.load_task_runs`: the one
reader with the one damage rule that ``summarize-experiment`` uses, so the
report's numbers are the summaries' numbers. Beside it this module reads,
leniently (a run page still shows what is readable), what the summaries do
not need: the metadata (question, reference, injected error, models), the
records of runs the summaries skip, which other run files exist (for links),
rollbacks of a run (:class:`~descriptor.records.RollbackRecord` with its trace
and eval) and the topology pictures. Paths come from :mod:`descriptor.layout`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from descriptor.events import Event
from descriptor.layout import SUFFIXES, RunPaths, find_task_dirs
from descriptor.report.page_file import read_page_file
from descriptor.records import EvalRecord, RollbackRecord, RunMetadata, RunResult
from descriptor.run_files import (
    RunFileError,
    RunIssue,
    RunRecord,
    load_task_runs,
    read_eval,
    read_metadata,
    read_record,
    read_result,
    read_run,
    read_trace_prefix,
)
from descriptor.untrusted import parse_index

LINKED_FILES = ("trace", "answer", "eval", "metadata", "result", "trace_metrics", "trajectory_json", "trajectory_md")
"""Run files (:data:`descriptor.layout.SUFFIXES` kinds) a run page links to when present."""
PICTURE_SUFFIXES = (".png", ".svg", ".mmd")


@dataclass(kw_only=True, slots=True, frozen=True)
class TaskDir:
    """One ``<benchmark>/<system>/<task_id>`` directory, its file names and its finished runs."""

    benchmark: str
    system: str
    task_id: str
    path: Path
    names: frozenset[str]
    finished: tuple[int, ...]
    """Run indices with a ``result.json``."""


@dataclass(kw_only=True, slots=True)
class RollbackData:
    """One rollback of a run: its record, the resumed trace and its evaluation (each None when unreadable)."""

    index: int
    paths: RunPaths
    record: RollbackRecord | None
    events: list[Event] | None
    eval: EvalRecord | None
    files: dict[str, str]
    """Kind (``json``, ``trace``, ``eval``) -> file name in the task directory."""
    problem: str | None = None


@dataclass(kw_only=True, slots=True)
class RunData:
    """One run with a ``result.json``: its record (None when the summaries skip it) and what else is readable."""

    benchmark: str
    system: str
    task_id: str
    run_index: int
    task_dir: Path
    record: RunRecord | None
    issues: list[RunIssue]
    result: RunResult | None
    eval: EvalRecord | None
    metadata: RunMetadata | None
    files: dict[str, str]
    """Kind (see :data:`LINKED_FILES`) -> file name, for the files present."""
    rollbacks: list[RollbackData] = field(default_factory=list)
    page: dict[str, Any] | None = None
    """The run's page data file (:mod:`descriptor.report.page_file`) when it matches the trace; None: the
    record's events are used."""

    @property
    def key(self) -> str:
        """``<benchmark>/<system>/<task_id>/run_<r>``: how attribution outputs name a run."""
        return f"{self.benchmark}/{self.system}/{self.task_id}/run_{self.run_index}"

    @property
    def answer(self) -> str:
        return self.result.answer if self.result is not None else ""

    @property
    def question(self) -> str:
        return self.metadata.task.question if self.metadata is not None else ""

    @property
    def reference(self) -> Any:
        """The expected answer: ``metadata.task.reference``, else ``eval.details.expected``, else None."""
        if self.metadata is not None and self.metadata.task.reference is not None:
            return self.metadata.task.reference
        return self.eval.details.get("expected") if self.eval is not None else None

    @property
    def injected(self) -> dict[str, Any] | None:
        """The scripted model's injected error ``{agent, step}`` (step: a ``step_index`` value), if any."""
        inj = self.metadata.injected_error if self.metadata is not None else None
        return None if inj is None else {"agent": inj.agent, "step": inj.step}


@dataclass(kw_only=True, slots=True)
class TaskRuns:
    """The runs of one task directory, in run order, and the issues met reading them."""

    dir: TaskDir
    runs: list[RunData]
    issues: list[RunIssue]


@dataclass(kw_only=True, slots=True, frozen=True)
class Picture:
    """A topology picture file (png/svg/mmd) found in the experiment."""

    path: Path
    benchmark: str | None
    system: str | None


def scan(root: Path) -> list[TaskDir]:
    """Task directories of the experiment, their file names and finished run indices (listings only)."""
    out = []
    for d in find_task_dirs(root):
        names = frozenset(p.name for p in d.iterdir())
        finished = sorted(r for r in _indices(names) if RunPaths(d, r).result.name in names)
        out.append(TaskDir(benchmark=d.parent.parent.name, system=d.parent.name, task_id=d.name, path=d,
                           names=names, finished=tuple(finished)))
    return out


def _indices(names: frozenset[str]) -> set[int]:
    out = set()
    for n in names:
        if n.startswith("run_") and n.endswith(SUFFIXES["result"]):
            if (r := parse_index(n[4:-len(SUFFIXES["result"])])) is not None:
                out.add(r)
    return out


def _lenient(read: Any, paths: RunPaths) -> Any:
    try:
        return read(paths)
    except RunFileError:
        return None


def _rollbacks(paths: RunPaths, names: frozenset[str]) -> list[RollbackData]:
    out = []
    for k in paths.rollbacks():
        rb = paths.for_rollback(k)
        files = {"json": rb.rollback_record.name}
        files.update({kind: rb.file(kind).name for kind in ("trace", "eval") if rb.file(kind).name in names})
        problem = None
        try:
            record = read_record(rb.rollback_record, RollbackRecord)
        except RunFileError as err:
            record, problem = None, str(err)
        events = None
        if "trace" in files:
            events, found = read_trace_prefix(rb.trace)
            if found:
                problem = problem or found[0].warning().removeprefix("warning: ")
        else:
            problem = problem or "no rollback trace file"
        out.append(RollbackData(index=k, paths=rb, record=record, events=events, files=files, problem=problem,
                                eval=_lenient(read_eval, rb) if "eval" in files else None))
    return out


def _with_page(paths: RunPaths, rec: RunRecord | None,
               identity: tuple[str, str, str]) -> tuple[RunRecord | None, dict[str, Any] | None, list[RunIssue]]:
    """The run's page data if its file matches the trace; else the record with its events (parsed now when
    the record was read from the trace's digest), and any issues that parse met."""
    if rec is None or rec.events:
        return rec, None, []
    if (page := read_page_file(paths.page, rec.digest.sha256)) is not None:
        return rec, page, []
    reread, issues = read_run(paths, identity)
    return reread, None, issues


def load_task(td: TaskDir, root: Path,
              read: tuple[list[RunRecord], list[RunIssue]] | None = None) -> TaskRuns:
    """Every finished run of ``td``; a run the summaries skip still gets a :class:`RunData` (record None).

    Runs are read from their traces' digests and page data files when those match the traces (no trace is
    parsed then), else from the traces, under the one damage rule either way. ``read``: what
    ``load_task_runs(td.path, events=False)`` returned, when the caller has it already (the summaries)."""
    identity = (td.benchmark, td.system, td.task_id)
    records, issues = read if read is not None else load_task_runs(td.path, identity, events=False)
    issues = list(issues)
    by_index = {rec.run_index: rec for rec in records}
    pages: dict[int, dict[str, Any]] = {}
    for r, rec in list(by_index.items()):
        rec, page, found = _with_page(RunPaths(td.path, r), rec, identity)
        issues += found
        if rec is None:
            del by_index[r]
        else:
            by_index[r] = rec
        if page is not None:
            pages[r] = page
    # Paths relative to the root, as in the summaries' issue lists.
    issues = [i.model_copy(update={"path": str(Path(i.path).relative_to(root))}) for i in issues]
    runs = []
    rolled_back = {n.partition(".")[0] for n in td.names if ".rollback_" in n}  # "run_<r>" of runs with rollbacks
    for r in td.finished:
        paths = RunPaths(td.path, r)
        rec = by_index.get(r)
        runs.append(RunData(
            benchmark=td.benchmark, system=td.system, task_id=td.task_id, run_index=r, task_dir=td.path, record=rec,
            issues=[i for i in issues if Path(i.path).name.startswith(f"run_{r}.")],
            result=rec.result if rec is not None else _lenient(read_result, paths),
            eval=rec.eval if rec is not None else _lenient(read_eval, paths),
            metadata=_lenient(read_metadata, paths),
            files={k: name for k in LINKED_FILES if (name := paths.name(k)) in td.names},
            rollbacks=_rollbacks(paths, td.names) if f"run_{r}" in rolled_back else [],
            page=pages.get(r)))
    return TaskRuns(dir=td, runs=runs, issues=issues)


def find_pictures(root: Path) -> list[Picture]:
    """Topology pictures: ``<root>/<benchmark>/<system>/*``, ``<root>/graphs/**`` and ``<root>/*``
    (png, svg, mmd; the summaries' own ``plots/`` are not topology pictures)."""
    out: list[Picture] = []
    for p in sorted(root.glob("*/*/*")):
        if p.suffix in PICTURE_SUFFIXES and p.is_file():
            out.append(Picture(path=p, benchmark=p.parent.parent.name, system=p.parent.name))
    graphs = root / "graphs"
    if graphs.is_dir():
        for p in sorted(graphs.rglob("*")):
            if p.suffix in PICTURE_SUFFIXES and p.is_file():
                parts = p.relative_to(graphs).parts
                out.append(Picture(path=p, benchmark=parts[0] if len(parts) > 2 else None,
                                   system=parts[-2] if len(parts) > 1 else None))
    out += [Picture(path=p, benchmark=None, system=None) for p in sorted(root.glob("*"))
            if p.suffix in PICTURE_SUFFIXES and p.is_file()]
    return out


def read_text(path: Path, limit: int = 200_000) -> str | None:
    """A small text file (a picture's mermaid source), cut at ``limit`` characters; None when unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:limit]
    except OSError:
        return None
