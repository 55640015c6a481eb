"""Success before and after the automatic rollback of ``run --rollback``, and what the rollback cost.

Per task (fields of ``descriptor.json``), over the task's finished runs:

- ``rolled_back``: runs with a sweep rollback (``run_<r>.rollback_<k>.json`` with ``origin: sweep``) that ran
  to its end;
- ``success_after_rollback``: mean over runs of the run's success, or, for a rolled-back run, its
  rollback's success (a rollback that ended in an error leaves the run failed);
- ``rollback_tokens``, ``rollback_cost_usd``: mean over runs of the tokens and USD the rollbacks spent (0 for a
  run not rolled back; errored rollbacks count: they were spent).

The fields are blank (None) unless the experiment was rolled back (``rollback_sweep.json`` at its root, or a
sweep rollback record in the task), so summaries of sweeps without ``--rollback`` are unchanged. Roll-ups
average them over tasks like every other field, except ``rolled_back``, which they add up.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from descriptor.layout import ROLLBACK_SWEEP_NAME, RunPaths, is_rollback_record
from descriptor.records import RollbackRecord
from descriptor.run_files import RunFileError, RunRecord, read_record

ROLLBACK_FIELDS: tuple[str, ...] = ("rolled_back", "success_after_rollback", "rollback_tokens", "rollback_cost_usd")
AVERAGED_ROLLBACK_FIELDS: tuple[str, ...] = ROLLBACK_FIELDS[1:]


def rolled_back_experiment(root: Path) -> bool:
    """True when ``run --rollback`` rolled back this experiment (its record is at the root)."""
    return (Path(root) / ROLLBACK_SWEEP_NAME).is_file()


def readable_rollbacks(paths: RunPaths) -> Iterator[RollbackRecord]:
    """Run ``paths``'s rollback records, oldest first; an unreadable one (interrupted before its record was
    written whole) is skipped."""
    for k in paths.rollbacks():
        try:
            yield read_record(paths.for_rollback(k).rollback_record, RollbackRecord)
        except RunFileError:
            continue


def sweep_rollback(paths: RunPaths) -> RollbackRecord | None:
    """Run ``paths``'s automatic rollback (``origin: sweep``): the one that ran to its end, else the last that ended
    in an error (a later invocation retries those); None when there is none.

    Unreadable rollback records are skipped (a rollback interrupted before its record was written has none).
    """
    errored = None
    for rec in readable_rollbacks(paths):
        if rec.origin == "sweep":
            if rec.status != "error":
                return rec
            errored = rec
    return errored


def _finished(rec: RollbackRecord) -> bool:
    return rec.status != "error"


def task_rollback_fields(runs: Sequence[RunRecord], *, enabled: bool) -> dict[str, Any]:
    """The ``ROLLBACK_FIELDS`` of one task's finished ``runs`` (None each when not ``enabled`` and no run has one)."""
    # One listing of the task directory instead of a glob per run: most tasks were never rolled back.
    rolled = bool(runs) and any(is_rollback_record(name) for name in os.listdir(runs[0].paths.task_dir))
    recs = [sweep_rollback(r.paths) if rolled else None for r in runs]
    if not runs or (not enabled and not any(recs)):
        return dict.fromkeys(ROLLBACK_FIELDS)
    done = [rec is not None and _finished(rec) for rec in recs]
    after = [bool(rec.success) if ok and rec is not None else r.success for r, rec, ok in zip(runs, recs, done)]
    n = len(runs)
    return {
        "rolled_back": sum(done),
        "success_after_rollback": sum(after) / n,
        "rollback_tokens": sum(rec.tokens for rec in recs if rec is not None) / n,
        "rollback_cost_usd": sum(rec.cost_usd for rec in recs if rec is not None) / n,
    }


def rollup_rollback_fields(descriptors: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The roll-up of the tasks' rollback fields: ``rolled_back`` summed, the others averaged over tasks."""
    values = {k: [d.get(k) for d in descriptors] for k in ROLLBACK_FIELDS}
    if not descriptors or any(v is None for vs in values.values() for v in vs):
        return dict.fromkeys(ROLLBACK_FIELDS)
    row: dict[str, Any] = {"rolled_back": sum(values["rolled_back"])}
    row.update({k: sum(values[k]) / len(descriptors) for k in AVERAGED_ROLLBACK_FIELDS})
    return row
