"""``run --rollback conformal --calibration self``: calibrate on the system's own failures, labelled by replay.

Natural failures (the embedded model, any real model) have no decisive step
until :mod:`attribution.rollback.labels` finds one by counterfactual replay.
Two sources of such labels:

- ``--rollback-labels FILE``: ``labels.jsonl`` of earlier failures of the same
  system (``label-failures`` on an earlier sweep;
  :func:`attribution.rollback.sweep.earlier_labels_choices`). The labelled runs are loaded
  from their own directories; the trained scorer scores them cross-fitted, the
  conformal method is calibrated on those scores, and this sweep's failed runs
  are scored by the scorer trained on them (never on runs of a target's own
  question) and get their sets. The earlier runs and this sweep's are disjoint,
  so it is a plain split-conformal calibration.
- without it: this sweep's own failed runs are labelled by replay (written to
  ``<root>/labels.jsonl``; an existing one is reused) and calibrated
  cross-fitted, exactly as the injected labels of a scripted sweep are
  (:func:`attribution.rollback.sweep.self_calibrated_choices`): no run is scored
  or calibrated by anything that saw it or its label. The labelling replays are
  spent on every failed run, on top of its rollback: the rollback sweep record
  says how many tokens they cost.
"""

from __future__ import annotations

from pathlib import Path

from attribution.sources.labelfile import Label, apply_labels, read_labels
from attribution.sources.loaders import MalformedFile, load_run
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.layout import RunPaths

SELF = "self"
"""The ``--calibration`` value that asks for calibration on replay labels."""
LABELS_NAME = "labels.jsonl"
"""Where the sweep's own replay labels go, at the experiment root."""


def labelled_runs(labels: dict[str, Label]) -> list[Trajectory]:
    """The runs ``labels`` label (``status: labelled``), loaded from their directories, with the labels.

    Ids are the runs' full path prefixes, so they never collide with the ids of the sweep being rolled back.
    """
    out = []
    for lab in labels.values():
        if lab.status != "labelled":
            continue
        if lab.run is None:
            raise UserError(f"label of {lab.run_id}: no 'run' path (written by an older label-failures); label the "
                            "runs again")
        run = RunPaths.parse(lab.run)
        try:
            t = load_run(run.task_dir, run.run_index)
        except MalformedFile as err:
            raise UserError(f"label of {lab.run_id}: {err}") from None
        (t,) = apply_labels([t.model_copy(update={"id": lab.run_id})], {lab.run_id: lab})
        out.append(t.model_copy(update={"id": str(run.prefix)}))
    return out


async def own_labels(root: Path, failed: list[Trajectory], samples: int, concurrency: int,
                     note: bool = True) -> tuple[list[Trajectory], int]:
    """``failed`` with the replay labels of ``<root>/labels.jsonl`` (made now unless it labels all of them, with
    ``note`` as the rollbacks have it), and the tokens the labelling replays spent."""
    from attribution.rollback.labels import label_failures

    path = root / LABELS_NAME
    labels = read_labels(path) if path.is_file() else {}
    if any(t.id not in labels or labels[t.id].note != note for t in failed):
        labels = {lab.run_id: lab for lab in await label_failures(root, samples=samples, out=path,
                                                                  concurrency=concurrency, note=note)}
    return apply_labels(failed, labels), sum(lab.tokens for lab in labels.values())
