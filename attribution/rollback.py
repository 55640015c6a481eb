"""Rollback and restart: fork a failed run from the checkpoint before a chosen step.

A trajectory step in a trace carries ``state_id``: the top-level LangGraph
checkpoint its node ran from. Restarting from step ``j`` means forking that
checkpoint (``update_state`` adds a note saying the later history went wrong,
with the failed continuation) and resuming to the end. The fork runs on a
copy of the checkpoint database; the original run's files are never touched.

Only top-level checkpoints are used: LangGraph's time travel into a subgraph
re-runs the whole subgraph (pinned by ``tests/test_rollback.py``).

Steps that share a ``state_id`` ran in one super-step (workers fanned out
with ``Send``, or several tool-call steps of one node): forking that
checkpoint redoes all of them. So the restart step is always the first step
of the chosen step's super-step (:func:`superstep_start`), and the cost and
the resumed trace's step numbers count from there.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import structlog
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import BaseModel

from attribution.conformal import Calibration, predict
from attribution.scorefile import ScoreRecord
from attribution.trajectory import Trajectory
from benchmark.base import Task
from benchmark.registry import get_benchmark
from descriptor.run_metrics import compute_run_metrics
from descriptor.schema import read_trace
from mas.topologies.agent import RunContext
from mas.config import ExperimentConfig
from descriptor.errors import UserError
from descriptor.io import read_json, write_json_atomic
from mas.llm.models import ModelSet
from mas.scripted.model import InjectionPlan
from mas.systems import SYSTEMS, final_answer
from mas.tracing import JsonlWriter, Tracer, use_tracer

log = structlog.get_logger(__name__)

Strategy = Literal["conformal", "top1", "restart"]
STRATEGIES: tuple[str, ...] = ("conformal", "top1", "restart")
FAILED_TAIL_CHARS = 1500
"""Characters of the failed continuation shown in the rollback note."""


class RollbackRecord(BaseModel):
    """``rollback_<k>.json``: what one rollback did and what it cost."""

    version: int = 2
    """2: ``set`` is the true set (may be empty), with ``fallback`` and ``chosen_step``."""
    run: str
    """Path prefix of the original run (``.../task/run_<r>``)."""
    rollback_index: int
    strategy: str
    set: list[int]
    """Steps the strategy flagged (conformal set, the top-1 step, or all steps); may be empty (see fallback)."""
    fallback: bool = False
    """True when ``set`` was empty and the restart point was substituted (the last step)."""
    chosen_step: int | None = None
    """The step the strategy pointed at (first of ``set``, or the substitute)."""
    restart_step: int
    """First step redone: the first step of ``chosen_step``'s super-step; steps before it are kept."""
    n_steps: int
    """Trajectory steps of the original run."""
    steps_redone: int
    """Trajectory steps the rollback produced."""
    cost: float
    """(n_steps - restart_step) / n_steps: the fraction of the original steps redone (restart = 1.0)."""
    tokens: int
    """Tokens spent by the resumed run (tokens)."""
    scoring_nfe: int = 0
    """Model calls spent scoring the steps."""
    success: bool
    answer: str
    decisive_step: int | None
    """The known decisive error (scripted injection), when there is one."""
    covered: bool | None
    """Whether ``set`` (the true set, never the substitute) holds the decisive step (None when unknown)."""
    wall_time_s: float


class Choice(BaseModel):
    """What a strategy flagged and where it points the restart."""

    members: list[int]
    """The flagged steps (may be empty for conformal)."""
    step: int
    """The step to restart at, before super-step alignment."""
    fallback: bool = False
    """The set was empty and ``step`` is a substitute."""


def choose_restart(strategy: str, scores: ScoreRecord | None, calibration: Calibration | None) -> Choice:
    """The flagged steps and the restart step for ``strategy``."""
    if strategy == "restart":
        n = scores.n_steps if scores else 0
        return Choice(members=list(range(n)), step=0)
    if scores is None or scores.n_steps == 0:
        raise UserError(f"strategy {strategy!r} needs step scores")
    if strategy == "top1":
        top = max(range(scores.n_steps), key=lambda i: (scores.step_scores[i], -i))
        return Choice(members=[top], step=top)
    if strategy == "conformal":
        if calibration is None:
            raise UserError("strategy 'conformal' needs --calibration")
        return set_choice(predict(calibration.fitted(), scores).steps, scores.n_steps)
    raise UserError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")


def set_choice(steps: Iterable[int], n_steps: int) -> Choice:
    """The restart choice for a conformal set: its first step."""
    members = sorted(steps)
    if not members:
        # An empty set flags nothing; redo the last step so the run still gets a second try,
        # but keep the empty set on record (coverage is about the set, not the substitute).
        return Choice(members=[], step=n_steps - 1, fallback=True)
    return Choice(members=members, step=members[0])


def superstep_start(traj: Trajectory, step: int) -> int:
    """The smallest step index sharing ``step``'s checkpoint: where a fork from it really restarts.

    Parallel siblings (``Send`` fan-out) and the several steps of one node
    all run from one checkpoint; resuming it redoes every one of them.
    """
    state_id = traj.steps[step].state_id
    if state_id is None:
        return step
    return min(s.index for s in traj.steps if s.state_id == state_id)


def _run_paths(run: str | Path) -> tuple[Path, int]:
    """``(task_dir, run_index)`` from a run prefix ``.../run_<r>`` or any of its files."""
    p = Path(run)
    name = p.name.split(".")[0]
    if not name.startswith("run_") or not name[4:].isdigit():
        raise UserError(f"{run}: expected a run path like <task_dir>/run_<r> (or one of its files)")
    return p.parent, int(name[4:])


def _failed_tail(traj: Trajectory, start: int) -> str:
    lines = [f"- step {s.index} ({s.agent}): {s.content[:200]}" for s in traj.steps[start:]]
    tail = "\n".join(lines)
    if len(tail) > FAILED_TAIL_CHARS:
        tail = "...\n" + tail[-FAILED_TAIL_CHARS:]
    return tail + f"\nFinal answer of that attempt (judged wrong): {traj.final_answer!r}"


def rollback_note(traj: Trajectory, restart_step: int) -> str:
    """What the resumed agents are told about the failed continuation."""
    return (
        "Note: an earlier attempt continued from this point and failed; its later history contained "
        "an error. Re-check each step carefully instead of repeating it. The failed continuation was:\n"
        + _failed_tail(traj, restart_step)
    )


def next_rollback_index(task_dir: Path, run_index: int) -> int:
    k = 0
    while (task_dir / f"run_{run_index}.rollback_{k}.json").exists():
        k += 1
    return k


async def restart_run(traj: Trajectory, *, restart_step: int, note: str, k: int) -> tuple[dict[str, Any], Path]:
    """Fork the run of ``traj`` before ``restart_step``, resume it to the end and evaluate.

    Writes ``run_<r>.rollback_<k>.trace.jsonl``, ``.eval.json`` and a copy of
    the checkpoint database; returns (outcome fields, trace path).
    """
    task_dir, r = _run_paths(traj.source_path.removesuffix(".trace.jsonl") if traj.source_path else traj.id)
    meta = read_json(task_dir / f"run_{r}.metadata.json")
    cfg = ExperimentConfig.model_validate(meta["config"])
    if meta["system"] not in SYSTEMS:
        raise UserError(f"{task_dir}: system {meta['system']!r} is not available in this installation")
    bench = get_benchmark(meta["benchmark"], cfg.benchmarks.get(meta["benchmark"]))
    t = meta["task"]
    task = Task(task_id=meta["task_id"], question=t["question"], reference=t["reference"],
                metadata=t.get("metadata") or {})
    state_id = traj.steps[restart_step].state_id
    if state_id is None:
        raise UserError(f"{traj.source_path}: step {restart_step} has no state_id; it cannot be resumed")
    # The fork redoes the whole super-step, so the resumed trace numbers its steps from its first one.
    first_step = superstep_start(traj, restart_step)

    prefix = task_dir / f"run_{r}.rollback_{k}"
    db = Path(f"{prefix}.checkpoints.sqlite")
    shutil.copyfile(task_dir / meta["checkpoint_db"], db)
    plan = meta.get("injection_plan")
    # A fired injection is one-shot: the resumed run must not repeat it.
    injection = None if plan is None else InjectionPlan(agent=plan["agent"], step=plan["step"],
                                                        fired=meta.get("injected_error") is not None)
    models = ModelSet(cfg, seed=meta["seed"], injection=injection)
    rt = RunContext(cfg=cfg, models=models, question=task.question, answer_kind=bench.answer_kind)
    trace_path = Path(f"{prefix}.trace.jsonl")
    trace_path.unlink(missing_ok=True)
    tracer = Tracer(f"{meta['run_id']}/rollback_{k}", [JsonlWriter(trace_path)], first_step=first_step)
    config = {"configurable": {"thread_id": meta["thread_id"], "checkpoint_ns": "", "checkpoint_id": state_id}}
    error, state = None, {}
    with use_tracer(tracer):
        try:
            async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
                graph = SYSTEMS[meta["system"]](rt).compile(checkpointer=saver)
                forked = await graph.aupdate_state(config, {"notes": [note]})
                state = await graph.ainvoke(None, {**forked, "recursion_limit": 200})
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
            tracer.emit("system:runtime", "error", {"kind": "rollback_failed", "error": error[:2000]})
        finally:
            tracer.close()
    answer = final_answer(state) if error is None else None
    ev = bench.evaluate(task, answer or "")
    write_json_atomic(f"{prefix}.eval.json", {"success": ev.success, "score": ev.score, "details": ev.details})
    events = read_trace(trace_path)
    metrics = compute_run_metrics(events)
    return {
        "success": ev.success, "answer": answer or "", "error": error,
        "tokens": metrics.tokens_total,
        "steps_redone": sum(1 for e in events if isinstance(e.payload.get("step_index"), int)),
    }, trace_path


async def rollback_one(traj: Trajectory, *, strategy: str, scores: ScoreRecord | None,
                       calibration: Calibration | None, scoring_nfe: int = 0,
                       choice: Choice | None = None) -> RollbackRecord:
    """Choose the restart step for ``strategy`` (unless ``choice`` is given), restart the run, and write
    ``rollback_<k>.json``."""
    t0 = time.perf_counter()
    choice = choice or choose_restart(strategy, scores, calibration)
    members = list(range(traj.n_steps)) if strategy == "restart" else choice.members
    restart = superstep_start(traj, choice.step)
    task_dir, r = _run_paths(traj.source_path.removesuffix(".trace.jsonl"))
    k = next_rollback_index(task_dir, r)
    outcome, _ = await restart_run(traj, restart_step=restart, note=rollback_note(traj, restart), k=k)
    decisive = traj.mistake_step
    rec = RollbackRecord(
        run=str(task_dir / f"run_{r}"), rollback_index=k, strategy=strategy, set=members,
        fallback=choice.fallback, chosen_step=choice.step, restart_step=restart,
        n_steps=traj.n_steps, steps_redone=outcome["steps_redone"],
        cost=(traj.n_steps - restart) / traj.n_steps, tokens=outcome["tokens"], scoring_nfe=scoring_nfe,
        success=outcome["success"], answer=outcome["answer"], decisive_step=decisive,
        covered=None if decisive is None else decisive in members, wall_time_s=time.perf_counter() - t0,
    )
    write_json_atomic(task_dir / f"run_{r}.rollback_{k}.json", rec.model_dump(mode="json"))
    return rec
