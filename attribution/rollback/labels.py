"""Counterfactual labels of the project's own failed runs: the decisive step, found by replay.

Restarting a failed run at step ``k`` forks the checkpoint before ``k`` and
re-executes ``k`` onward (:func:`attribution.rollback.restart.rollback_one`,
with the note a rollback gives, or none with ``note=False``), then re-evaluates
the answer. A label answers "which restart repairs the run" for one way of
resuming, so labels made with the note calibrate rollbacks made with it, and
labels made without it rollbacks made without it. The
restart *flips* the outcome when the replay succeeds. The decisive step is the
latest ``k`` whose restart flips it: every earlier restart redoes it too, every
later one keeps it in the history. Restarts are only possible at super-step
starts (steps sharing a checkpoint are redone together,
:func:`~attribution.rollback.restart.superstep_start`), so the candidates are
those and a label is always one of them.

Assuming flips are monotone in ``k`` (a restart before the decisive step
redoes it), the latest flipping candidate is found by bisection: about
``log2(candidates) + 1`` probed points per failure instead of one per step.
Each point is replayed ``samples`` times (each with its own seed, so a
stochastic model draws again); a point flips when at least one replay
succeeds, and the label carries the decisive point's flip share with its
Wilson interval. A failure that not even a full restart flips has no
decisive step (``status: unrepairable``), and is left out of calibration.

The scripted double's injected error fires once per run: a resumed run whose
injection already fired never injects again (:func:`mas.sweep.runner.resume_run`).
So a restart at or before the injected step re-executes that step correctly and
flips, and a later one keeps the wrong step: the label is the injected step's
super-step start, the injected step itself when every step has its own checkpoint.

Every replay is a rollback of the run (``rollback_<k>.json`` with ``origin:
label``; the sweep summaries ignore it), so its tokens and answer stay on record, and a rerun after an
interruption reads the finished replays instead of redoing them (:func:`earlier_replays`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from attribution.rollback.restart import Choice, check_configs, rollback_one, run_of
from attribution.sources.labelfile import Label, Probe
from attribution.sources.loaders import load_runs_dir
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.io import write_text_atomic
from descriptor.outputs import OutputKind
from descriptor.records import RollbackRecord
from descriptor.rollback_summary import readable_rollbacks
from descriptor.stats import wilson_interval
from mas.logging import get_logger

log = get_logger(__name__)

LABELS_FILE = OutputKind("labels file", keys=frozenset({"run_id", "status", "decisive_step"}), lines=True)
"""What ``label-failures --out`` writes: one :class:`Label` a line."""


def restart_points(traj: Trajectory) -> list[int]:
    """The steps a restart can really start at: first steps of their super-step, with a checkpoint, ascending."""
    seen: set[str] = set()
    out = []
    for s in traj.steps:
        if s.state_id is not None and s.state_id not in seen:
            seen.add(s.state_id)
            out.append(s.index)
    return out


def earlier_replays(traj: Trajectory, step: int, note: bool = True) -> list[RollbackRecord]:
    """This run's finished label replays restarted at ``step`` with (or without) the note, oldest first.

    An interrupted ``label-failures`` left them on disk; bisection takes the same path again given the same
    outcomes, so a rerun reads them instead of replaying (an unreadable or errored record is replayed again).
    A replay made the other way about the note answers another question and is never reused (one that predates
    the record's ``note`` field was made with it).
    """
    return [rec for rec in readable_rollbacks(run_of(traj))
            if rec.origin == "label" and rec.restart_step == step and rec.status != "error"
            and (rec.note is not False) == note]


async def _probe(traj: Trajectory, step: int, samples: int, note: bool) -> Probe:
    wins = done = errors = tokens = 0
    first_error: str | None = None
    kept = earlier_replays(traj, step, note)
    for j in range(samples):  # one after another: each replay takes the run's next rollback index
        rec = kept[j] if j < len(kept) else await rollback_one(
            traj, strategy="label", scores=None, calibration=None, keep_going=True, note=note,
            choice=Choice(members=[step], step=step), origin="label")  # its own seed: mas.sweep.runner.rollback_seed
        tokens += rec.tokens
        if rec.status == "error":
            errors += 1
            first_error = first_error or (rec.error or "")[:300] or None
            log.warning("label replay ended in an error", run=rec.run, step=step, error=(rec.error or "")[:300])
            continue
        done += 1
        wins += rec.success
    return Probe(step=step, successes=wins, samples=done, errors=errors, tokens=tokens, error=first_error)


async def label_failure(traj: Trajectory, *, samples: int = 1, note: bool = True) -> Label:
    """The decisive step of one failed run by bisection over its restart points (see the module docstring);
    ``note``: the replays tell the resumed agents of the failure, as a rollback does by default."""
    points = restart_points(traj)
    probes: list[Probe] = []
    common = {"run_id": traj.id, "run": str(run_of(traj).prefix), "n_steps": traj.n_steps,
              "candidates": len(points), "samples": samples, "note": note, "injected_step": traj.mistake_step}
    if not points:
        return Label(**common, status="error", decisive_step=None, decisive_agent=None, flip_probability=None,
                     flip_ci=None, replays=0, tokens=0, probes=[], error="no step has a checkpoint to restart from")
    by_index: dict[int, Probe] = {}

    async def flips(i: int) -> bool:
        p = await _probe(traj, points[i], samples, note)
        probes.append(p)
        by_index[i] = p
        if p.samples == 0:
            raise _Unreplayable(p)
        return p.flips

    try:
        lo, hi = 0, len(points)  # invariant: the decisive point is in [lo, hi); point 0 is presumed to flip
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if await flips(mid):
                lo = mid
            else:
                hi = mid
        if lo not in by_index:
            await flips(lo)
    except _Unreplayable as stop:
        cause = stop.probe.error
        return Label(**common, status="error", decisive_step=None, decisive_agent=None, flip_probability=None,
                     flip_ci=None, replays=sum(p.samples + p.errors for p in probes),
                     tokens=sum(p.tokens for p in probes), probes=probes,
                     error="every replay ended in an error" + (f": {cause}" if cause else ""))
    best = by_index[lo]
    total = {"replays": sum(p.samples + p.errors for p in probes), "tokens": sum(p.tokens for p in probes)}
    if not best.flips:  # only possible at point 0: not even a full restart repairs the run
        return Label(**common, **total, status="unrepairable", decisive_step=None, decisive_agent=None,
                     flip_probability=0.0, flip_ci=wilson_interval(0, best.samples), probes=probes)
    return Label(**common, **total, status="labelled", decisive_step=best.step,
                 decisive_agent=traj.steps[best.step].agent, flip_probability=best.successes / best.samples,
                 flip_ci=wilson_interval(best.successes, best.samples), probes=probes)


class _Unreplayable(Exception):
    def __init__(self, probe: Probe) -> None:
        self.probe = probe


async def label_failures(experiment_root: str | Path, *, samples: int = 1, out: str | Path,
                         concurrency: int = 2, note: bool = True) -> list[Label]:
    """Label every failed run under ``experiment_root``; write ``out`` (JSONL, one :class:`Label` a line) atomically."""
    if samples < 1:
        raise UserError(f"--samples must be at least 1 (got {samples})")
    failed = load_runs_dir(Path(experiment_root).resolve()).trajectories  # a label's run path works from anywhere
    if not failed:
        raise UserError(f"{experiment_root}: no failed run to label")
    check_configs(failed)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(t: Trajectory) -> Label:
        async with gate:  # runs in parallel; the replays of one run in sequence (bisection)
            return await label_failure(t, samples=samples, note=note)

    labels = await asyncio.gather(*(one(t) for t in failed))
    write_text_atomic(out, "".join(lab.model_dump_json() + "\n" for lab in labels))
    return list(labels)
