"""Rollback and restart: fork a failed run from the checkpoint before a chosen step.

A trajectory step in a trace carries ``state_id``: the top-level LangGraph
checkpoint its node ran from. Restarting from step ``j`` means forking that
checkpoint (``update_state`` adds the rollback note of the conformal paper's
appendix C.3, :func:`rollback_note`) and resuming to the end. The fork runs on a
copy of the checkpoint database; the original run's files are never touched.

Only top-level checkpoints are used: LangGraph's time travel into a subgraph
re-runs the whole subgraph (pinned by ``tests/attribution/test_rollback.py``).

Steps that share a ``state_id`` ran in one super-step (workers fanned out
with ``Send``, or several tool-call steps of one node): forking that
checkpoint redoes all of them. So the restart step is always the first step
of the chosen step's super-step (:func:`superstep_start`), and the cost and
the resumed trace's step numbers count from there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from attribution.conformal import Calibration, predict
from attribution.llm.prompt_fit import clip, one_line
from attribution.sources.scorefile import ScoreRecord
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.io import write_json_atomic
from descriptor.layout import RunPaths
from descriptor.records import ROLLBACK_STRATEGIES, RollbackRecord
from descriptor.run_config import run_config
from descriptor.run_files import RunFileError, read_metadata
from mas.logging import get_logger
from mas.sweep.runner import resume_run

log = get_logger(__name__)

Strategy = Literal["conformal", "top1", "restart", "retry", "oracle"]
UNSCORED: frozenset[str] = frozenset({"restart", "retry", "oracle"})
"""Strategies that need no step scores."""
FROM_START: frozenset[str] = frozenset({"restart", "retry"})
"""Strategies that redo the whole run (their flagged set is every step)."""
FAILED_CHARS = 1500
"""Characters of the failed attempt shown in the rollback note (its end kept: the later steps are where the set
points)."""
KEPT_CHARS = 600
"""Characters of the kept history (before the restart step) shown in the rollback note (its end kept)."""
TASK_CHARS = 600
"""Characters of the task restated at the note's end."""
STEP_CHARS = 200
"""Characters of each step's text in the note."""
NOTE_OPENING = "Note: an earlier attempt at this task contains wrong information"
"""How the rollback note begins (:func:`rollback_note`)."""


class Choice(BaseModel):
    """What a strategy flagged and where it points the restart."""

    members: list[int]
    """The flagged steps (may be empty for conformal)."""
    step: int
    """The step to restart at, before super-step alignment."""
    fallback: bool = False
    """The set was empty and ``step`` is a substitute."""


def choose_restart(strategy: str, scores: ScoreRecord | None, calibration: Calibration | None,
                   decisive: int | None = None) -> Choice:
    """The flagged steps and the restart step for ``strategy`` (``decisive``: the known decisive step, for oracle)."""
    if strategy in FROM_START:
        n = scores.n_steps if scores else 0
        return Choice(members=list(range(n)), step=0)
    if strategy == "oracle":
        if decisive is None:
            raise UserError("strategy 'oracle' restarts at the known decisive step, and this run has none (only "
                            "scripted runs with an injected error have one)")
        return Choice(members=[decisive], step=decisive)
    if scores is None or scores.n_steps == 0:
        raise UserError(f"strategy {strategy!r} needs step scores")
    if strategy == "top1":
        top = max(range(scores.n_steps), key=lambda i: (scores.step_scores[i], -i))
        return Choice(members=[top], step=top)
    if strategy == "conformal":
        if calibration is None:
            raise UserError("strategy 'conformal' needs --calibration")
        return set_choice(predict(calibration.fitted(), scores).steps, scores.n_steps)
    raise UserError(f"unknown strategy {strategy!r}; expected one of {', '.join(ROLLBACK_STRATEGIES)}")


def set_choice(steps: Iterable[int], n_steps: int) -> Choice:
    """The restart choice for a conformal set: its first step (the paper's section 3.3).

    An empty set flags no step, and the paper restarts at "the first step in the set", which it lacks; its only
    rule for an empty set is TWF's fallback to the single most likely step (appendix B), which is the
    calibration's option ``--twf-fallback`` (then a twf set is never empty). Here an empty set restarts at the
    last step: the run gets its second try for the least redone work, and the empty set stays on record
    (``fallback``; coverage is about the set, not the substitute).
    """
    members = sorted(steps)
    if not members:
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


def _steps_text(traj: Trajectory, start: int, stop: int, limit: int) -> str:
    """Steps ``start..stop-1`` as ``- step i (agent): text`` lines, each cut at :data:`STEP_CHARS`, the whole cut
    to its last ``limit`` characters."""
    text = "\n".join(f"- step {s.index} ({one_line(s.agent)}): {one_line(s.content)[:STEP_CHARS]}"
                     for s in traj.steps[start:stop])
    return "...\n" + text[-limit:] if len(text) > limit else text


def tells(strategy: str, note: bool = True) -> bool:
    """Whether a rollback with ``strategy`` tells the resumed agents of the failure (:func:`rollback_note`):
    ``note`` asks for it, and ``retry`` never does (a rerun without this project)."""
    return note and strategy != "retry"


def rollback_note(traj: Trajectory, restart_step: int) -> str:
    """What the resumed agents (and a judge that votes again) are told: the conformal paper's rollback note
    (appendix C.3) in our words. It carries what C.3's note does: that the earlier attempt, steps 0 to its last,
    contains wrong information; to avoid making the same mistakes where they find them; that attempt's
    conversation (its final answer, judged wrong, with it); the history before the restart step as mostly correct;
    and the task, to be solved step by step. The texts are cut (:data:`FAILED_CHARS`, :data:`KEPT_CHARS`,
    :data:`TASK_CHARS`) so the note fits a small model's window.
    """
    last = traj.n_steps - 1
    kept = (_steps_text(traj, 0, restart_step, KEPT_CHARS) if restart_step > 0
            else "(none: the run restarts from its first step)")
    return (
        f"{NOTE_OPENING} (its conversation from step 0 to step {last}, below). If you find its mistake, do not make "
        "it again.\n"
        f"The earlier attempt:\n{_steps_text(traj, 0, traj.n_steps, FAILED_CHARS)}\n"
        f"Its final answer (judged wrong): {clip(one_line(traj.final_answer or ''), 300)!r}\n"
        f"The history before step {restart_step}, which is mostly correct and is kept:\n{kept}\n"
        f"Solve this task step by step: {clip(one_line(traj.query), TASK_CHARS)}"
    )


def run_of(traj: Trajectory) -> RunPaths:
    """The run a trajectory of this project's traces was loaded from."""
    return RunPaths.parse(traj.source_path or traj.id)


def check_configs(failed: Sequence[Trajectory]) -> None:
    """Refuse with the file named (exit 2, before any replay) when a failed run's experiment config is missing,
    unreadable or changed: every replay of those runs would end in the same error.

    A run whose own metadata is unreadable is left to its replay, which records the error for that run only.
    """
    checked: set[tuple[Path, str | None]] = set()  # the runs of one experiment and config share one file
    for traj in failed:
        run = run_of(traj)
        try:
            meta = read_metadata(run)
        except RunFileError:
            continue
        key = (run.experiment_root, meta.config_sha256)
        if key in checked:
            continue
        try:
            run_config(run, meta)
        except RunFileError as err:
            raise UserError(str(err)) from None
        checked.add(key)


def next_rollback_index(run: RunPaths) -> int:
    taken = run.rollbacks()
    return taken[-1] + 1 if taken else 0


async def rollback_one(traj: Trajectory, *, strategy: str, scores: ScoreRecord | None,
                       calibration: Calibration | None, scoring_nfe: int = 0,
                       choice: Choice | None = None, keep_going: bool = False,
                       origin: str = "manual", seed: int | None = None, note: bool = True) -> RollbackRecord:
    """Choose the restart step for ``strategy`` (unless ``choice`` is given), restart the run, and write
    ``rollback_<k>.json`` (``origin``: ``sweep`` for the automatic rollback of ``run --rollback``, ``label`` for
    a replay of ``label-failures``; ``seed``: another seed for the resumed part than the run's; ``note``: tell the
    resumed agents of the failure, :func:`rollback_note`; ``retry`` never does).

    A rollback that cannot start (a missing or damaged checkpoint) raises
    :class:`UserError`, or with ``keep_going`` returns a ``status: error``
    record instead; one whose resumed graph failed (a model call that failed
    for good) is written with ``status: error``: neither is a failed rollback.
    """
    t0 = time.perf_counter()
    choice = choice or choose_restart(strategy, scores, calibration, traj.mistake_step)
    members = list(range(traj.n_steps)) if strategy in FROM_START else choice.members
    restart = superstep_start(traj, choice.step)
    run = run_of(traj)
    k = next_rollback_index(run)
    decisive = traj.mistake_step
    common = {"run": str(run.prefix), "rollback_index": k, "strategy": strategy, "set": members,
              "fallback": choice.fallback, "chosen_step": choice.step, "restart_step": restart,
              "n_steps": traj.n_steps, "cost": (traj.n_steps - restart) / traj.n_steps, "scoring_nfe": scoring_nfe,
              "decisive_step": decisive, "covered": None if decisive is None else decisive in members,
              "restart_covers": None if decisive is None else restart <= decisive, "origin": origin,
              "note": tells(strategy, note)}
    try:
        state_id = traj.steps[restart].state_id
        if state_id is None:
            raise UserError(f"{traj.source_path}: step {restart} has no state_id; it cannot be resumed")
        # retry: the run again with another seed and no word of the failure (what a rerun without this project is)
        told = rollback_note(traj, restart) if common["note"] else None
        outcome = await resume_run(run, checkpoint_id=state_id, note=told, rollback_index=k, first_step=restart,
                                   seed=seed)
    except UserError as err:
        if not keep_going:
            raise
        # Nothing ran and nothing is written: an error entry for the experiment's table.
        return RollbackRecord(**common, steps_redone=0, tokens=0, success=False, answer="",
                              wall_time_s=time.perf_counter() - t0, status="error", error=str(err)[:2000])
    rec = RollbackRecord(
        **common, steps_redone=outcome.steps_redone, tokens=outcome.tokens, cost_usd=outcome.cost_usd,
        success=outcome.success, answer=outcome.answer, wall_time_s=time.perf_counter() - t0,
        status="error" if outcome.error is not None else "finished", error=outcome.error,
    )
    write_json_atomic(outcome.paths.rollback_record, rec)
    return rec
