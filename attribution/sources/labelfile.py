"""``labels.jsonl`` of ``label-failures``: counterfactual decisive steps of failed runs, and applying them.

Written by :mod:`attribution.rollback.labels`; read by ``score-steps --labels`` and ``calibrate --labels``
(the labels replace the runs' ``mistake_step``), so conformal sets are calibrated on the system's own failures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from attribution.sources.scorefile import ScoreRecord
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.untrusted import BadJson, parse_json


class Probe(BaseModel):
    """The replays of one restart point."""

    model_config = ConfigDict(extra="forbid")

    step: int
    """Restart step (a super-step start)."""
    successes: int
    """Replays whose answer was judged correct."""
    samples: int
    """Replays that ran to their end (errored ones are left out)."""
    errors: int = 0
    """Replays that ended in an infrastructure error (no outcome)."""
    error: str | None = None
    """The first of those errors (what to fix: a dead endpoint, a run's missing config file)."""
    tokens: int
    """Tokens the replays at this point spent."""

    @property
    def flips(self) -> bool:
        return self.successes > 0


class Label(BaseModel):
    """One line of ``labels.jsonl``: a failed run's counterfactual decisive step."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    """The run's trajectory id (its path relative to the experiment root), as ``score-steps`` writes it."""
    run: str | None = None
    """Path prefix of the run (``.../task/run_<r>``), so the labelled run can be found from anywhere."""
    status: Literal["labelled", "unrepairable", "error"]
    """``unrepairable``: no restart flipped the outcome; ``error``: the run could not be replayed."""
    decisive_step: int | None
    """Latest restart step whose replay flips the outcome (a super-step start); null unless labelled."""
    decisive_agent: str | None
    """Agent of the decisive step."""
    flip_probability: float | None
    """Share of the decisive point's replays that succeeded."""
    flip_ci: tuple[float, float] | None
    """Wilson 95 % interval of ``flip_probability``."""
    replays: int
    """Replayed continuations (samples over every probed point, errored ones included)."""
    tokens: int
    """Tokens the replays spent, in total."""
    n_steps: int
    """Trajectory steps of the failed run."""
    candidates: int
    """Restart points (super-step starts) the bisection chose among."""
    samples: int
    """Replays per probed point."""
    note: bool = True
    """The replays told the resumed agents of the failure (the rollback note); False with ``--no-note``. Labels
    written before the option were all made with the note."""
    probes: list[Probe]
    """Every probed point, in probing order."""
    injected_step: int | None = None
    """The scripted double's injected step, when the run has one (for checking the label; not used by it)."""
    error: str | None = None


def read_labels(path: str | Path, flag: str = "--labels") -> dict[str, Label]:
    """``labels.jsonl`` by run id; a missing file is a ``UserError`` naming ``flag``, a bad line one naming the
    file and line."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{flag} {path}: file not found (write it with `label-failures`)")
    out: dict[str, Label] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            lab = Label.model_validate(parse_json(line))
        except (BadJson, ValidationError) as err:
            raise UserError(f"{path}:{n}: not a label line of label-failures ({str(err).splitlines()[0]})") from None
        out[lab.run_id] = lab
    return out


def note_mismatch(paths: str | Path | Iterable[str | Path | None] | None, note: bool,
                  flag: str = "--no-note") -> str | None:
    """A warning when the labels at ``paths`` (a calibration's: its decisive steps' and its scorer's training
    labels) were made the other way about the rollback note than rollbacks that ``note``; None when they agree,
    or there are no readable labels to tell."""
    if paths is None or isinstance(paths, str | Path):
        paths = [paths]
    for path in dict.fromkeys(str(p) for p in paths if p is not None):
        if said := _one_mismatch(path, note, flag):
            return said
    return None


def _one_mismatch(path: str, note: bool, flag: str) -> str | None:
    if not Path(path).is_file():
        return None
    try:
        made = {lab.note for lab in read_labels(path).values() if lab.status == "labelled"}
    except UserError:
        return None
    if not made or made == {note}:
        return None
    rollbacks = f"these rollbacks are {'told of' if note else 'not told of'} the failure"
    why = "a label says which restart repairs a run for one way of resuming"
    if len(made) > 1:  # no flag makes the rollbacks match both: only labels made one way do
        return (f"the calibration's labels ({path}) were made both with and without the rollback note, and "
                f"{rollbacks}: {why} (label the failures again one way, the way these rollbacks resume)")
    how = "with" if True in made else "without"
    return (f"the calibration's labels ({path}) were made {how} the rollback note, and {rollbacks}: {why} "
            f"({'add' if note else 'drop'} {flag}, or label the failures again the same way)")


L = TypeVar("L", Trajectory, ScoreRecord)


def apply_labels(items: Sequence[L], labels: dict[str, Label], source: str | Path | None = None) -> list[L]:
    """Trajectories or score records with the labels' decisive steps as their ``mistake_step``/``mistake_agent``.

    The labels replace any other label (an injected step): a run without a
    label, or whose label is not ``labelled``, gets none, so calibration skips it.
    A label made for a run of another length (another run under the same id), or for a run of another experiment
    (the same task ids, another experiment directory), is a ``UserError`` naming ``source`` (the labels file):
    a sweep's run ids repeat in every experiment over the same tasks, so the id alone cannot tell.
    """
    where = f"{source}: " if source is not None else ""
    out = []
    for x in items:
        lab = labels.get(x.id)
        if lab is not None and lab.n_steps != x.n_steps:
            raise UserError(f"{where}label of {x.id}: a run with {lab.n_steps} steps, but the run has {x.n_steps}: the "
                            "labels are of other runs")
        if lab is not None and lab.decisive_step is not None and not 0 <= lab.decisive_step < x.n_steps:
            raise UserError(f"{where}label of {x.id}: field 'decisive_step': expected a step from 0 to "
                            f"{x.n_steps - 1}, got {lab.decisive_step}")
        if lab is not None and lab.run is not None:
            theirs, ours = _experiment(lab.run, x.id), _experiment(_run_path(x), x.id)
            if theirs is not None and ours is not None and theirs != ours:
                raise UserError(f"{where}label of {x.id}: made for that run of experiment {theirs!r} ({lab.run}), "
                                f"and the run here is of experiment {ours!r}: the labels are of another experiment "
                                "(label this one's failures with `label-failures`)")
        step = lab.decisive_step if lab is not None and lab.status == "labelled" else None
        out.append(x.model_copy(update={"mistake_step": step,
                                        "mistake_agent": lab.decisive_agent if step is not None else None}))
    return out


def _run_path(x: Trajectory | ScoreRecord) -> str | None:
    """Where the labelled item's run lives: a run's trajectory file, or the runs directory a score was made on
    (with the id appended, so both read as ``<experiment>/<run id>``)."""
    if isinstance(x, Trajectory):
        return x.source_path
    train = x.scorer_train
    return None if train is None or train.runs_dir is None else str(Path(train.runs_dir) / x.id)


def _experiment(path: str | None, run_id: str) -> str | None:
    """The experiment directory's name in ``path``, a run's path (``.../<experiment>/<run id>[.<file>]``) whose
    trajectory id is ``run_id``; None when the path is not laid out so.

    >>> _experiment("/x/exp1/arith/sas/t0/run_0", "arith/sas/t0/run_0"), _experiment("t0/run_0", "arith/sas/t0/run_0")
    ('exp1', None)
    """
    if not path:
        return None
    parts, n = Path(path).parts, len(Path(run_id).parts)
    if len(parts) <= n or parts[-n:-1] != Path(run_id).parts[:-1]:
        return None
    return parts[-n - 1]
