"""Load failed runs into :class:`~attribution.trajectory.Trajectory` objects.

Two sources:

- Who&When JSON logs (``algorithm_generated`` and ``hand_crafted`` subsets):
  :func:`load_who_and_when_file`, :func:`load_who_and_when_dir`.
- This project's own failed runs (trace + metadata files of the runtime):
  :func:`load_run`, :func:`load_runs_dir`. The trace-event → step mapping is
  documented in ``attribution/README.md``.

A malformed file never stops a directory load: it is logged (structlog
warning naming the file and the reason) and returned in
:attr:`LoadResult.skipped`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ValidationError

from attribution.trajectory import Step, Trajectory
from descriptor.schema import iter_trace_lines
from descriptor.errors import UserError

log = structlog.get_logger(__name__)

SUBSETS: tuple[str, ...] = ("algorithm_generated", "hand_crafted")
Subset = Literal["algorithm_generated", "hand_crafted", "all"]
_RESULT_RE = re.compile(r"^run_(\d+)\.result\.json$")
_ROLE_SUFFIX_RE = re.compile(r"\(([^()]*)\)\s*$")


class MalformedFile(ValueError):
    """A data file that cannot become a trajectory; the message names file and field."""


class SkippedFile(BaseModel):
    """One file a directory load skipped, and why."""

    path: str
    reason: str


class LoadResult(BaseModel):
    """Trajectories loaded from a directory, plus the files skipped on the way."""

    trajectories: list[Trajectory]
    skipped: list[SkippedFile] = []


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
    if isinstance(value, bool):
        raise MalformedFile(f"{path}: field 'mistake_step': expected a digit string, got {value!r}")
    text = str(value).strip()
    if not text.isdigit():
        raise MalformedFile(f"{path}: field 'mistake_step': expected a digit string, got {value!r}")
    step = int(text)
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
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise MalformedFile(f"{path}: cannot read: {err}") from None
    except json.JSONDecodeError as err:
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
    )


def _numeric_stem_key(p: Path) -> tuple[int, int | str]:
    return (0, int(p.stem)) if p.stem.isdigit() else (1, p.stem)


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


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MalformedFile(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MalformedFile(f"{path}: not readable JSON: {err}") from None
    if not isinstance(data, dict):
        raise MalformedFile(f"{path}: expected a JSON object")
    return data


def _render_payload(event_type: str, payload: dict[str, Any]) -> str:
    """Compact text of a step without ``content`` (e.g. a tool call's name and arguments)."""
    rest = {k: v for k, v in payload.items() if k not in ("step_index", "role", "sends")}
    body = json.dumps(rest, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return f"[{event_type}] {body}"


_RESULT_CHARS = 2000  # tool output kept per step (characters)


def _tool_result_text(payload: dict[str, Any]) -> str:
    out = payload.get("output", payload.get("content", payload.get("error", "")))
    text = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str)
    if len(text) > _RESULT_CHARS:
        text = text[:_RESULT_CHARS] + " …"
    failed = payload.get("ok") is False
    return f"\n-> {'tool error' if failed else 'tool result'}: {text}"


def _trace_steps(trace: Path) -> tuple[list[Step], list[int]]:
    """Steps in trace order and each step's ``step_index`` as written in the trace."""
    rows: list[dict[str, Any]] = []
    written: list[int] = []
    by_call: dict[str, int] = {}
    errors: list[str] = []
    for lineno, ev, err in iter_trace_lines(trace):
        if err is not None:
            errors.append(f"{trace}:{lineno}: {err}")
            continue
        if errors:  # damage before the last line: the trace cannot be trusted
            raise MalformedFile(errors[0])
        p = ev.payload
        if ev.event_type == "tool_result":
            # A tool call's result belongs to the step that made the call.
            pos = by_call.pop(str(p.get("tool_call_id")), None) if p.get("tool_call_id") else None
            if pos is None and rows and rows[-1]["kind"] == "tool_call" and not rows[-1]["has_result"]:
                pos = len(rows) - 1
            if pos is not None:
                rows[pos]["content"] += _tool_result_text(p)
                rows[pos]["has_result"] = True
            continue
        idx = p.get("step_index")
        if not isinstance(idx, int) or isinstance(idx, bool):
            continue
        content = p.get("content")
        if not isinstance(content, str) or not content.strip():
            content = _render_payload(ev.event_type, p)
        if ev.event_type == "tool_call" and p.get("tool_call_id"):
            by_call[str(p["tool_call_id"])] = len(rows)
        rows.append({"agent": ev.actor, "role": str(p.get("role") or ""), "content": content,
                     "state_id": ev.state_id, "kind": ev.event_type, "has_result": False})
        written.append(idx)
    if errors:
        log.warning("damaged last trace line ignored", path=str(trace), reason=errors[0])
    if written != list(range(len(written))):
        # Positions are what methods and labels use; state_id stays the resumable point.
        log.warning("step_index does not count 0, 1, 2, ...; steps renumbered by position",
                    path=str(trace), first=written[:5])
    steps = [Step(index=i, agent=r["agent"], role=r["role"], content=r["content"], state_id=r["state_id"],
                  kind=r["kind"]) for i, r in enumerate(rows)]
    return steps, written


def _injected(meta: dict[str, Any], path: Path, written: list[int]) -> tuple[str | None, int | None]:
    """The injected error as ``(agent, position)``; ``written`` are the trace's step indices."""
    inj = meta.get("injected_error")
    if inj is None:
        return None, None
    if not isinstance(inj, dict):
        raise MalformedFile(f"{path}: field 'injected_error': expected an object {{agent, step}} or null")
    agent, step = inj.get("agent"), inj.get("step")
    if step is not None:
        if not isinstance(step, int) or isinstance(step, bool) or step not in written:
            raise MalformedFile(f"{path}: field 'injected_error.step': expected one of the trace's step indices "
                                f"{written[0] if written else '-'}..{written[-1] if written else '-'}, got {step!r}")
        step = written.index(step)
    return (str(agent) if agent is not None else None), step


def load_run(task_dir: str | Path, run_index: int, *, root: str | Path | None = None) -> Trajectory:
    """Run ``run_index`` of ``task_dir`` as a trajectory (success or not).

    ``root`` only shapes the id: the run's path relative to it.
    """
    task_dir = Path(task_dir)
    stem = task_dir / f"run_{run_index}"
    trace = Path(f"{stem}.trace.jsonl")
    if not trace.is_file():
        raise MalformedFile(f"{trace}: trace file not found")
    steps, written = _trace_steps(trace)
    if not steps:
        raise MalformedFile(f"{trace}: no event has an integer payload.step_index (no trajectory steps)")
    meta_path = Path(f"{stem}.metadata.json")
    meta = _read_json_object(meta_path)
    task = meta.get("task") if isinstance(meta.get("task"), dict) else {}
    query = task.get("question")
    if not isinstance(query, str):
        log.warning("run metadata has no task.question; query left empty", path=str(meta_path))
        query = ""
    reference = task.get("reference")
    answer_path = Path(f"{stem}.answer.txt")
    answer = answer_path.read_text(encoding="utf-8") if answer_path.is_file() else None
    agent, step = _injected(meta, meta_path, written)
    base = Path(root) if root is not None else task_dir.parent
    try:
        rid = str(stem.relative_to(base))
    except ValueError:
        rid = str(stem)
    return Trajectory(
        id=rid, subset="runs", query=query, ground_truth=None if reference is None else str(reference),
        final_answer=answer, steps=steps, mistake_agent=agent, mistake_step=step, source_path=str(trace),
    )


def _failed_run(result_path: Path) -> bool:
    data = _read_json_object(result_path)
    success = data.get("success")
    if not isinstance(success, bool):
        raise MalformedFile(f"{result_path}: field 'success': expected true or false")
    return not success


def load_runs_dir(runs_dir: str | Path) -> LoadResult:
    """Every failed, finished run under ``runs_dir`` (an experiment root or one task dir).

    A run counts when ``run_<r>.result.json`` exists and says ``success:
    false``; unfinished runs (no result file) are ignored silently, broken
    ones are skipped and listed.
    """
    root = Path(runs_dir)
    if not root.is_dir():
        raise UserError(f"{root}: runs directory not found")
    out: list[Trajectory] = []
    skipped: list[SkippedFile] = []
    results = sorted(root.rglob("run_*.result.json"), key=lambda p: (str(p.parent), _run_no(p)))
    for result_path in results:
        m = _RESULT_RE.match(result_path.name)
        if m is None:
            continue
        try:
            if _failed_run(result_path):
                # ids keep the task directory's name even when runs_dir is that directory
                base = root.parent if result_path.parent == root else root
                out.append(load_run(result_path.parent, int(m.group(1)), root=base))
        except (MalformedFile, ValidationError) as err:
            reason = str(err).splitlines()[0]
            log.warning("skipped malformed run", path=str(result_path), reason=reason)
            skipped.append(SkippedFile(path=str(result_path), reason=reason))
    return LoadResult(trajectories=out, skipped=skipped)


def _run_no(p: Path) -> int:
    m = _RESULT_RE.match(p.name)
    return int(m.group(1)) if m else -1


def load_trajectories(*, data_dir: str | Path | None = None, runs_dir: str | Path | None = None,
                      subset: Subset = "all") -> LoadResult:
    """Exactly one of ``data_dir`` (Who&When) or ``runs_dir`` (this project's runs)."""
    if (data_dir is None) == (runs_dir is None):
        raise UserError("give exactly one of --data-dir (Who&When) or --runs-dir (this project's runs)")
    if data_dir is not None:
        return load_who_and_when_dir(data_dir, subset)
    return load_runs_dir(runs_dir)  # type: ignore[arg-type]
