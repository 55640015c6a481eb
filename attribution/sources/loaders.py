"""Load failed runs into :class:`~attribution.sources.trajectory.Trajectory` objects.

Two sources:

- Who&When JSON logs (``algorithm_generated`` and ``hand_crafted`` subsets):
  :func:`load_who_and_when_file`, :func:`load_who_and_when_dir`.
- This project's own failed runs (trace + metadata files of the runtime):
  :func:`load_run`, :func:`load_runs_dir`. The trace-event → step mapping is
  documented in ``attribution/README.md``.
- OpenTelemetry / OpenInference spans of any agent program (OTLP JSON,
  Phoenix's span export): :mod:`attribution.sources.span_loader`.

A malformed file never stops a directory load: it is logged (structlog
warning naming the file and the reason) and returned in
:attr:`LoadResult.skipped`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from attribution.sources.load_result import LoadResult, MalformedFile, SkippedFile
from attribution.sources.trajectory import Step, Trajectory
from descriptor.errors import UserError
from descriptor.events import Payload, ToolCall, ToolResult, read_trace_checked
from descriptor.layout import SUFFIXES, RunPaths, run_indices
from descriptor.records import RunMetadata
from descriptor.run_files import RunFileError, read_metadata, read_result
from descriptor.untrusted import BadJson, parse_index, parse_json
from mas.logging import get_logger

log = get_logger(__name__)

SUBSETS: tuple[str, ...] = ("algorithm_generated", "hand_crafted")
Subset = Literal["algorithm_generated", "hand_crafted", "all"]
_ROLE_SUFFIX_RE = re.compile(r"\(([^()]*)\)\s*$")


# ---------------------------------------------------------------- Who&When


def _who_and_when_steps(history: Any, subset: str, path: Path) -> list[Step]:
    if not isinstance(history, list) or not history:
        raise MalformedFile(f"{path}: field 'history': expected a non-empty list of messages")
    speaker_key = "name" if subset == "algorithm_generated" else "role"
    steps = []
    for i, msg in enumerate(history):
        if not isinstance(msg, dict):
            raise MalformedFile(f"{path}: history[{i}]: expected an object, got {type(msg).__name__}")
        speaker = msg.get(speaker_key) or msg.get("name") or msg.get("role")
        if not isinstance(speaker, str) or not speaker.strip():
            raise MalformedFile(f"{path}: history[{i}].{speaker_key}: expected a non-empty string")
        content = msg.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        if subset == "algorithm_generated":
            role = str(msg.get("role") or "")
        else:
            # hand_crafted speakers read "Orchestrator (thought)": the agent is the
            # part before the parenthesis, the parenthesised part is its role.
            m = _ROLE_SUFFIX_RE.search(speaker)
            role = m.group(1).strip() if m else ""
        steps.append(Step(index=i, agent=speaker.strip(), role=role, content=content))
    return steps


def _parse_step_label(value: Any, n_steps: int, path: Path) -> int | None:
    if value is None or value == "":
        return None
    step = None if isinstance(value, bool) else parse_index(str(value).strip())
    if step is None:
        raise MalformedFile(f"{path}: field 'mistake_step': expected a step number in ASCII digits, got {value!r}")
    if step >= n_steps:
        raise MalformedFile(f"{path}: field 'mistake_step': {step} is outside the {n_steps} steps of 'history'")
    return step


def load_who_and_when_file(path: str | Path, subset: str | None = None) -> Trajectory:
    """One Who&When record; ``subset`` defaults to the parent directory's name.

    Raises :class:`MalformedFile` naming the file and field on bad input.
    """
    path = Path(path)
    subset = subset or path.parent.name
    if subset not in SUBSETS:
        raise MalformedFile(f"{path}: unknown Who&When subset {subset!r}; expected one of {', '.join(SUBSETS)}")
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise MalformedFile(f"{path}: cannot read: {err}") from None
    except BadJson as err:
        raise MalformedFile(f"{path}: not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise MalformedFile(f"{path}: expected a JSON object at top level")
    steps = _who_and_when_steps(data.get("history"), subset, path)
    query = data.get("question")
    if not isinstance(query, str):
        raise MalformedFile(f"{path}: field 'question': expected a string")
    agent = data.get("mistake_agent")
    if agent is not None and not isinstance(agent, str):
        raise MalformedFile(f"{path}: field 'mistake_agent': expected a string, got {agent!r}")
    gt = data.get("ground_truth")
    return Trajectory(
        id=f"{subset}/{path.stem}",
        subset=subset,
        query=query,
        ground_truth=None if gt is None else str(gt),
        final_answer=None,
        steps=steps,
        mistake_agent=agent or None,
        mistake_step=_parse_step_label(data.get("mistake_step"), len(steps), path),
        mistake_reason=data.get("mistake_reason") if isinstance(data.get("mistake_reason"), str) else None,
        source_path=str(path),
        question_id=qid if isinstance(qid := data.get("question_ID"), str) and qid.strip() else None,
    )


def _numeric_stem_key(p: Path) -> tuple[int, int | str]:
    n = parse_index(p.stem)
    return (0, n) if n is not None else (1, p.stem)


def load_who_and_when_dir(data_dir: str | Path, subset: Subset = "all") -> LoadResult:
    """All records of ``data_dir/<subset>/*.json`` (``all``: both subsets present).

    ``data_dir`` may also be a subset directory itself (its name picks the
    subset). Malformed files are skipped and listed in the result.
    """
    root = Path(data_dir)
    if not root.is_dir():
        raise UserError(f"{root}: data directory not found")
    if subset not in (*SUBSETS, "all"):
        raise UserError(f"--subset {subset!r}: expected algorithm_generated, hand_crafted or all")
    if root.name in SUBSETS:
        if subset not in ("all", root.name):
            raise UserError(f"{root}: is the {root.name} subset, but --subset {subset} was asked for")
        dirs = [root]
    else:
        wanted = SUBSETS if subset == "all" else (subset,)
        dirs = [root / s for s in wanted if (root / s).is_dir()]
        if not dirs:
            raise UserError(f"{root}: no {' or '.join(wanted)} subdirectory with Who&When JSON files")
    out: list[Trajectory] = []
    skipped: list[SkippedFile] = []
    for d in dirs:
        for path in sorted(d.glob("*.json"), key=_numeric_stem_key):
            try:
                out.append(load_who_and_when_file(path, d.name))
            except (MalformedFile, ValidationError) as err:
                reason = str(err).splitlines()[0]
                log.warning("skipped malformed file", path=str(path), reason=reason)
                skipped.append(SkippedFile(path=str(path), reason=reason))
    return LoadResult(trajectories=out, skipped=skipped)


# ---------------------------------------------------------------- own runs


def _render_payload(event_type: str, payload: Payload) -> str:
    """Compact text of a step without ``content`` (e.g. a tool call's name and arguments)."""
    rest = payload.model_dump(mode="json", by_alias=True, exclude_none=True,
                              exclude={"step_index", "role", "sends", "kind", "input_messages"})
    body = json.dumps(rest, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return f"[{event_type}] {body}"


_RESULT_CHARS = 2000  # tool output kept per step (characters)


def _tool_result_text(payload: ToolResult) -> str:
    text = payload.output
    if len(text) > _RESULT_CHARS:
        text = text[:_RESULT_CHARS] + " …"
    return f"\n-> {'tool error' if payload.ok is False else 'tool result'}: {text}"


def _trace_steps(trace: Path) -> tuple[list[Step], list[int]]:
    """Steps in trace order and each step's ``step_index`` as written in the trace."""
    events, damage = read_trace_checked(trace)
    if events is None:  # damage before the last line: the trace cannot be trusted
        raise MalformedFile(f"{trace}:{damage[0].line}: {damage[0].message}")
    if damage:
        log.warning("damaged last trace line ignored", path=str(trace), reason=damage[0].message)
    rows: list[dict[str, Any]] = []
    written: list[int] = []
    by_call: dict[str, int] = {}
    for ev in events:
        p = ev.payload
        if isinstance(p, ToolResult):
            # A tool call's result belongs to the step that made the call.
            pos = by_call.pop(p.tool_call_id, None) if p.tool_call_id else None
            if pos is None and rows and rows[-1]["kind"] == "tool_call" and not rows[-1]["has_result"]:
                pos = len(rows) - 1
            if pos is not None:
                rows[pos]["content"] += _tool_result_text(p)
                rows[pos]["has_result"] = True
            continue
        idx = p.step_index
        if idx is None:
            continue
        content = getattr(p, "content", None)
        if not isinstance(content, str) or not content.strip():
            content = _render_payload(ev.event_type, p)
        if isinstance(p, ToolCall) and p.tool_call_id:
            by_call[p.tool_call_id] = len(rows)
        rows.append({"agent": ev.actor, "role": str(getattr(p, "role", "") or ""), "content": content,
                     "state_id": ev.state_id, "kind": ev.event_type, "has_result": False})
        written.append(idx)
    if written != list(range(len(written))):
        # Positions are what methods and labels use; state_id stays the resumable point.
        log.warning("step_index does not count 0, 1, 2, ...; steps renumbered by position",
                    path=str(trace), first=written[:5])
    steps = [Step(index=i, agent=r["agent"], role=r["role"], content=r["content"], state_id=r["state_id"],
                  kind=r["kind"]) for i, r in enumerate(rows)]
    return steps, written


def _injected(meta: RunMetadata, path: Path, written: list[int]) -> tuple[str | None, int | None]:
    """The injected error as ``(agent, position)``; ``written`` are the trace's step indices."""
    inj = meta.injected_error
    if inj is None:
        return None, None
    step = inj.step
    if step is not None:
        if step not in written:
            raise MalformedFile(f"{path}: field 'injected_error.step': expected one of the trace's step indices "
                                f"{written[0] if written else '-'}..{written[-1] if written else '-'}, got {step!r}")
        step = written.index(step)
    return inj.agent, step


def load_run(task_dir: str | Path, run_index: int, *, root: str | Path | None = None) -> Trajectory:
    """Run ``run_index`` of ``task_dir`` as a trajectory (success or not).

    ``root`` only shapes the id: the run's path relative to it.
    """
    paths = RunPaths(Path(task_dir), run_index)
    if not paths.trace.is_file():
        raise MalformedFile(f"{paths.trace}: trace file not found")
    steps, written = _trace_steps(paths.trace)
    if not steps:
        raise MalformedFile(f"{paths.trace}: no event has an integer payload.step_index (no trajectory steps)")
    try:
        meta = read_metadata(paths)
    except RunFileError as err:
        raise MalformedFile(str(err)) from None
    reference = meta.task.reference
    answer = paths.answer.read_text(encoding="utf-8", errors="replace") if paths.answer.is_file() else None
    agent, step = _injected(meta, paths.metadata, written)
    base = Path(root) if root is not None else paths.task_dir.parent
    try:
        rid = str(paths.prefix.relative_to(base))
    except ValueError:
        rid = str(paths.prefix)
    return Trajectory(
        id=rid, subset="runs", query=meta.task.question, ground_truth=None if reference is None else str(reference),
        final_answer=answer, steps=steps, mistake_agent=agent, mistake_step=step, source_path=str(paths.trace),
    )


def load_runs_dir(runs_dir: str | Path) -> LoadResult:
    """Every failed, finished run under ``runs_dir`` (an experiment root or one task dir).

    A run counts when ``run_<r>.result.json`` exists and says ``success:
    false`` with ``status: finished`` (an infrastructure error is no task
    failure to attribute); unfinished runs (no result file) are ignored
    silently, broken ones are skipped and listed.
    """
    root = Path(runs_dir)
    if not root.is_dir():
        raise UserError(f"{root}: runs directory not found")
    task_dirs = sorted({p.parent for p in root.rglob(f"run_*{SUFFIXES['result']}")})
    out: list[Trajectory] = []
    skipped: list[SkippedFile] = []
    for task_dir in task_dirs:
        for r in run_indices(task_dir):
            paths = RunPaths(task_dir, r)
            if not paths.result.is_file():
                continue
            try:
                result = read_result(paths)
                if not result.success and result.status == "finished":
                    # ids keep the task directory's name even when runs_dir is that directory
                    base = root.parent if task_dir == root else root
                    out.append(load_run(task_dir, r, root=base))
            except (MalformedFile, RunFileError, ValidationError) as err:
                reason = str(err).splitlines()[0]
                log.warning("skipped malformed run", path=str(paths.result), reason=reason)
                skipped.append(SkippedFile(path=str(paths.result), reason=reason))
    return LoadResult(trajectories=out, skipped=skipped)


def load_trajectories(*, data_dir: str | Path | None = None, runs_dir: str | Path | None = None,
                      spans: str | Path | None = None, subset: Subset = "all") -> LoadResult:
    """Exactly one of ``data_dir`` (Who&When), ``runs_dir`` (this project's runs) or ``spans`` (OpenTelemetry
    spans of any agent program, see :mod:`attribution.sources.span_loader`)."""
    if sum(x is not None for x in (data_dir, runs_dir, spans)) != 1:
        raise UserError("give exactly one of --data-dir (Who&When), --runs-dir (this project's runs) or --spans "
                        "(OpenTelemetry spans)")
    if data_dir is not None:
        return load_who_and_when_dir(data_dir, subset)
    if spans is not None:
        from attribution.sources.span_loader import load_spans

        return load_spans(spans)
    return load_runs_dir(runs_dir)  # type: ignore[arg-type]


def load_train_dir(path: str | Path) -> LoadResult:
    """A Who&When directory (has a subset directory, or is one) or else a runs directory."""
    p = Path(path)
    if p.name in SUBSETS or any((p / s).is_dir() for s in SUBSETS):
        return load_who_and_when_dir(p, "all")
    return load_runs_dir(p)
