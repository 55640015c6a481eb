"""Load one task directory's finished runs from their files alone.

A task directory is ``<root>/<benchmark>/<system>/<task_id>/`` holding, per
run ``r``, ``run_<r>.trace.jsonl``, ``run_<r>.eval.json`` and
``run_<r>.result.json`` (written last: its presence marks a finished run).

Damage rules (also in ``descriptor/README.md``):

- no ``result.json``: the run is unfinished and skipped;
- ``result.json`` or ``eval.json`` unreadable, missing or naming another
  benchmark/system/task: skipped;
- trace with a damaged *last* line only: included with the valid prefix;
- trace damaged anywhere else, or missing: skipped.

Every skip and every damaged line becomes a :class:`RunIssue` that callers
print and record in the summaries.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from descriptor.run_metrics import RunMetrics, compute_run_metrics
from descriptor.schema import RunResult, TraceEvent, iter_trace_lines

_RUN_FILE = re.compile(r"^run_(\d+)\.(?:trace\.jsonl|result\.json|eval\.json)$")

IssueKind = Literal["unfinished", "damaged_trace", "missing_trace", "bad_result", "bad_eval", "identity_mismatch"]


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
        what = "run included with the valid prefix" if self.included else "run skipped"
        return f"warning: {where}: {self.kind}: {self.message} ({what})"


@dataclass(kw_only=True, slots=True, frozen=True)
class RunRecord:
    """One finished run: its outcome, its eval verdict and its trace metrics."""

    run_index: int
    run_id: str
    success: bool
    """From ``result.json``."""
    completion: bool
    """From ``result.json``."""
    eval_success: bool
    """From ``eval.json``."""
    eval_score: float
    """From ``eval.json`` (in [0, 1])."""
    eval_completion: bool
    """``eval.json`` ``completion`` when present, else ``result.json`` completion."""
    metrics: RunMetrics
    events: tuple[TraceEvent, ...]


def run_indices(task_dir: Path) -> list[int]:
    """Run indices seen in any run file of ``task_dir``, ascending."""
    found = {int(m.group(1)) for p in task_dir.iterdir() if (m := _RUN_FILE.match(p.name))}
    return sorted(found)


def _read_json(path: Path) -> dict[str, Any]:
    obj = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    return obj


def read_trace_prefix(path: Path) -> tuple[list[TraceEvent] | None, list[RunIssue]]:
    """Events of a trace, applying the damage rules; ``None`` when the run must be skipped."""
    rows = list(iter_trace_lines(path))
    bad = [(n, err) for n, ev, err in rows if err is not None]
    if not bad:
        return [ev for _, ev, _ in rows], []
    last_line = rows[-1][0]
    if len(bad) == 1 and bad[0][0] == last_line:
        issue = RunIssue(path=str(path), line=bad[0][0], kind="damaged_trace", message=bad[0][1], included=True)
        return [ev for _, ev, err in rows if err is None], [issue]
    issues = [RunIssue(path=str(path), line=n, kind="damaged_trace", message=err, included=False) for n, err in bad]
    return None, issues


def _identity(result: RunResult, expected: tuple[str, str, str]) -> str | None:
    got = (result.benchmark, result.system, result.task_id)
    if got != expected:
        return f"result names benchmark/system/task {got}, directory is {expected}"
    return None


def load_run(task_dir: Path, r: int, identity: tuple[str, str, str]) -> tuple[RunRecord | None, list[RunIssue]]:
    """Load run ``r`` of ``task_dir``; ``identity`` is (benchmark, system, task_id) from the path."""
    result_path = task_dir / f"run_{r}.result.json"
    eval_path = task_dir / f"run_{r}.eval.json"
    trace_path = task_dir / f"run_{r}.trace.jsonl"
    if not result_path.exists():
        return None, [RunIssue(path=str(result_path), kind="unfinished", message="no result.json", included=False)]
    try:
        result = RunResult.model_validate(_read_json(result_path))
    except (ValueError, ValidationError) as err:
        msg = str(err).splitlines()[0]
        return None, [RunIssue(path=str(result_path), kind="bad_result", message=msg, included=False)]
    if (mismatch := _identity(result, identity)) is not None:
        return None, [RunIssue(path=str(result_path), kind="identity_mismatch", message=mismatch, included=False)]
    try:
        ev = _read_json(eval_path)
        eval_success, eval_score = ev["success"], ev["score"]
        if not isinstance(eval_success, bool) or isinstance(eval_score, bool) or not isinstance(eval_score, int | float):
            raise ValueError("expected success: bool and score: number")
        eval_completion = ev.get("completion", result.completion)
        if not isinstance(eval_completion, bool):
            raise ValueError("completion must be a boolean")
    except (OSError, ValueError, KeyError) as err:
        return None, [RunIssue(path=str(eval_path), kind="bad_eval", message=f"{type(err).__name__}: {err}", included=False)]
    if not trace_path.exists():
        return None, [RunIssue(path=str(trace_path), kind="missing_trace", message="no trace file", included=False)]
    events, issues = read_trace_prefix(trace_path)
    if events is None:
        return None, issues
    record = RunRecord(
        run_index=r,
        run_id=result.run_id,
        success=result.success,
        completion=result.completion,
        eval_success=eval_success,
        eval_score=float(eval_score),
        eval_completion=eval_completion,
        metrics=compute_run_metrics(events),
        events=tuple(events),
    )
    return record, issues


def load_task_runs(task_dir: Path, identity: tuple[str, str, str]) -> tuple[list[RunRecord], list[RunIssue]]:
    """All finished runs of a task directory (ascending run index) and the issues met."""
    records: list[RunRecord] = []
    issues: list[RunIssue] = []
    for r in run_indices(task_dir):
        record, found = load_run(task_dir, r, identity)
        issues.extend(found)
        if record is not None:
            records.append(record)
    return records, issues
