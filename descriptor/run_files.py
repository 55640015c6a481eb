"""Reading runs: the one reader of a run's files, with the one damage rule.

Every stage that reads runs (summaries, the report, attribution, rollback,
resume) reads them here, through the typed records of
:mod:`descriptor.records` and :mod:`descriptor.events`, at the paths of
:mod:`descriptor.layout`.

Damage rules (also in ``descriptor/README.md``):

- no ``result.json``: the run is unfinished and skipped;
- ``result.json`` or ``eval.json`` unreadable, missing or naming another
  benchmark/system/task: skipped;
- trace with a damaged *last* line only: included with the valid prefix;
- trace damaged anywhere else, or missing: skipped;
- trace changed after the run ended (its SHA-256 is not the one ``trace_metrics.json`` recorded): included,
  read as it is now, while its token and cost totals are still ``result.json``'s; skipped when they are not;
- ``trace_metrics.json`` whose own check fails (edited by hand): its figures are not used, the trace is read.

Every skip and every damaged line becomes a :class:`RunIssue` that callers
print and record in the summaries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from descriptor.events import Event, read_trace_checked
from descriptor.layout import RunPaths, run_indices
from descriptor.records import EvalRecord, RunMetadata, RunResult, TraceMetricsRecord
from descriptor.run_metrics import RunMetrics, compute_run_metrics
from descriptor.trace_digest import TraceDigest, trace_digest, trace_sha256
from descriptor.untrusted import BadJson, parse_json

IssueKind = Literal["unfinished", "damaged_trace", "missing_trace", "bad_result", "bad_eval", "bad_metadata",
                    "identity_mismatch", "trace_changed", "edited_record"]


class RunIssue(BaseModel):
    """A problem with one run's files, reported by ``summarize-experiment``."""

    path: str
    """The file at fault."""
    line: int | None = None
    """1-based line of a damaged trace line."""
    kind: IssueKind
    message: str
    included: bool
    """True when the run still counts (damaged last trace line: valid prefix used)."""

    def warning(self) -> str:
        """One line naming file, line and consequence."""
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        what = ("run skipped" if not self.included else "run included with the valid prefix"
                if self.kind == "damaged_trace" else "run included")
        return f"warning: {where}: {self.kind}: {self.message} ({what})"


class RunFileError(ValueError):
    """A run file that cannot be read as its record; the message names the file."""


def read_record(path: Path, model: type[BaseModel]) -> Any:
    """``path`` validated as ``model``; :class:`RunFileError` naming the file on any problem.

    Parsed and validated in one pass by pydantic-core (the parser of :func:`~descriptor.untrusted.parse_json`,
    with its depth bound): parsing to Python values first and validating those took ~1.7x as long, and a
    summary reads four records a run. A file that is no JSON object is parsed again only to say why.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RunFileError(f"{path}: file not found") from None
    except OSError as err:
        raise RunFileError(f"{path}: not readable JSON ({err})") from None
    try:
        return model.model_validate_json(raw)
    except ValidationError as err:
        e = err.errors()[0]
        if e["type"] != "json_invalid" and e["loc"]:
            raise RunFileError(f"{path}: field {'.'.join(map(str, e['loc']))}: {e['msg']}") from None
    json_object(path, raw)  # raises, saying why the file is no JSON object
    raise RunFileError(f"{path}: field (top): {e['msg']}")


def json_object(path: Path, raw: bytes) -> dict[str, Any]:
    """``raw``, the bytes read from ``path``, as a JSON object; :class:`RunFileError` naming the file otherwise."""
    try:
        data = parse_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, BadJson) as err:
        raise RunFileError(f"{path}: not readable JSON ({err})") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path}: expected a JSON object")
    return data


def read_result(paths: RunPaths) -> RunResult:
    return read_record(paths.result, RunResult)


def read_eval(paths: RunPaths) -> EvalRecord:
    return read_record(paths.eval, EvalRecord)


def read_metadata(paths: RunPaths) -> RunMetadata:
    return read_record(paths.metadata, RunMetadata)


@dataclass(kw_only=True, slots=True, frozen=True)
class RunRecord:
    """One finished run as read from its files: outcome, verdict, trace (and metadata when asked for)."""

    paths: RunPaths
    result: RunResult
    eval: EvalRecord
    events: tuple[Event, ...]
    """Empty when read with ``events=False`` from a trace's digest (see :func:`read_run`)."""
    metrics: RunMetrics
    digest: TraceDigest
    metadata: RunMetadata | None = None

    # Short names the descriptor code reads.
    run_index = property(lambda self: self.paths.run_index)
    run_id = property(lambda self: self.result.run_id)
    success = property(lambda self: self.result.success)
    completion = property(lambda self: self.result.completion)
    status = property(lambda self: self.result.status)
    eval_success = property(lambda self: self.eval.success)
    eval_score = property(lambda self: float(self.eval.score))

    @property
    def eval_completion(self) -> bool:
        """``eval.json`` completion when present, else ``result.json``'s."""
        return self.result.completion if self.eval.completion is None else self.eval.completion


def read_trace_prefix(path: Path) -> tuple[list[Event] | None, list[RunIssue]]:
    """Events of a trace under the damage rule; ``None`` when the run must be skipped."""
    events, damage = read_trace_checked(path)
    issues = [RunIssue(path=str(path), line=d.line, kind="damaged_trace", message=d.message, included=not d.fatal)
              for d in damage]
    return events, issues


@dataclass(kw_only=True, slots=True, frozen=True)
class _Digested:
    """What ``trace_metrics.json`` says of the trace (see :func:`_digested`)."""

    metrics: RunMetrics | None = None
    digest: TraceDigest | None = None
    """Both set: the record may stand for the trace."""
    trace_changed: bool = False
    """The trace's bytes are not those the run ended with."""
    record_edited: bool = False
    """The record's own check fails: its figures are not what the run wrote."""


def _digested(paths: RunPaths) -> _Digested:
    """The metrics and digest ``trace_metrics.json`` recorded when the run ended, when the record is as the run
    wrote it (its ``check``) and the trace still has the bytes they were computed from; otherwise what is wrong
    (nothing to say for a run written before digests or checks, or a record that does not parse: its trace is
    parsed as always)."""
    try:
        record = TraceMetricsRecord.model_validate_json(paths.trace_metrics.read_bytes())
        digest = record.digest
        if digest is None or record.check is None:
            return _Digested()
        if record.check != record.content_check():
            return _Digested(record_edited=True)
        if trace_sha256(paths.trace.read_bytes()) != digest.sha256:
            return _Digested(trace_changed=True)
    except (OSError, ValidationError):
        return _Digested()
    # The record is a RunMetrics with more fields, validated as one just now: its values need no second pass.
    return _Digested(metrics=RunMetrics.model_construct(**{k: getattr(record, k) for k in RunMetrics.model_fields}),
                     digest=digest)


def _changed_trace(paths: RunPaths, result: RunResult, metrics: RunMetrics) -> RunIssue:
    """The issue of a trace whose bytes changed after its run ended: the run still counts while the trace's
    totals are still ``result.json``'s (a harmless change), and is skipped when they are not (an edit that
    changes what the run cost)."""
    same = metrics.tokens_total == result.tokens_total and math.isclose(
        metrics.cost_total, result.cost_total_usd, rel_tol=1e-9, abs_tol=1e-12)
    what = "the trace was changed after the run ended (its SHA-256 is not the one trace_metrics.json recorded)"
    if same:
        return RunIssue(path=str(paths.trace), kind="trace_changed", included=True,
                        message=f"{what}; its totals are still result.json's, and it is read as it is now")
    return RunIssue(path=str(paths.trace), kind="trace_changed", included=False,
                    message=f"{what}, and its totals are no longer result.json's: tokens {metrics.tokens_total} "
                            f"against {result.tokens_total}, cost {metrics.cost_total:.6g} against "
                            f"{result.cost_total_usd:.6g} USD")


def read_run(paths: RunPaths, identity: tuple[str, str, str] | None = None, *,
             with_metadata: bool = False, events: bool = True) -> tuple[RunRecord | None, list[RunIssue]]:
    """Run ``paths`` and the issues met; ``identity`` (benchmark, system, task_id) is what the path says.

    ``events=False``: a caller that needs the trace's metrics and digest but not its events gets them from
    ``trace_metrics.json`` when the trace is unchanged since the run ended (no events then, no issues: an
    intact trace has none); otherwise the trace is parsed as always.
    """
    if not paths.result.exists():
        return None, [RunIssue(path=str(paths.result), kind="unfinished", message="no result.json", included=False)]
    try:
        result = read_result(paths)
    except RunFileError as err:
        return None, [RunIssue(path=str(paths.result), kind="bad_result", message=str(err), included=False)]
    if identity is not None and (got := (result.benchmark, result.system, result.task_id)) != identity:
        return None, [RunIssue(path=str(paths.result), kind="identity_mismatch", included=False,
                               message=f"result names benchmark/system/task {got}, directory is {identity}")]
    try:
        evaluation = read_eval(paths)
    except RunFileError as err:
        return None, [RunIssue(path=str(paths.eval), kind="bad_eval", message=str(err), included=False)]
    metadata = None
    if with_metadata:
        try:
            metadata = read_metadata(paths)
        except RunFileError as err:
            return None, [RunIssue(path=str(paths.metadata), kind="bad_metadata", message=str(err), included=False)]
    digested = _digested(paths)
    if not events and digested.metrics is not None and digested.digest is not None:
        return RunRecord(paths=paths, result=result, eval=evaluation, events=(), metrics=digested.metrics,
                         digest=digested.digest, metadata=metadata), []
    if not paths.trace.exists():
        return None, [RunIssue(path=str(paths.trace), kind="missing_trace", message="no trace file", included=False)]
    parsed, issues = read_trace_prefix(paths.trace)
    if parsed is None:
        return None, issues
    record = RunRecord(paths=paths, result=result, eval=evaluation, events=tuple(parsed),
                       metrics=compute_run_metrics(parsed), digest=trace_digest(parsed), metadata=metadata)
    if digested.record_edited:
        issues.append(RunIssue(path=str(paths.trace_metrics), kind="edited_record", included=True,
                               message="the record's check fails: it is not as the run wrote it, so its figures "
                                       "were not used; the trace was read instead"))
    if digested.trace_changed:
        issue = _changed_trace(paths, result, record.metrics)
        issues.append(issue)
        if not issue.included:
            return None, issues
    return record, issues


def load_task_runs(task_dir: Path, identity: tuple[str, str, str] | None = None, *, with_metadata: bool = False,
                   events: bool = True) -> tuple[list[RunRecord], list[RunIssue]]:
    """All finished runs of a task directory (ascending run index) and the issues met (``events``: see
    :func:`read_run`)."""
    if identity is None:
        identity = (task_dir.parent.parent.name, task_dir.parent.name, task_dir.name)
    records: list[RunRecord] = []
    issues: list[RunIssue] = []
    for r in run_indices(task_dir):
        record, found = read_run(RunPaths(task_dir, r), identity, with_metadata=with_metadata, events=events)
        issues.extend(found)
        if record is not None:
            records.append(record)
    return records, issues
