"""A held-out part of a labelled data set that no tuning decision may see.

The Who&When dev split is all the project has; the conformal methods were
designed on part of it and are reported on the rest. :func:`heldout_split`
fixes that rest once:

- records sharing a question (:func:`split_group`: the question text with case and
  whitespace ignored, the rule the recorded split was drawn with; Who&When reuses GAIA
  questions across subsets) stay on the same side, so a scorer trained on the other
  side never saw the held-out question. :func:`check_split` also refuses a split that
  the stricter fold grouping of :func:`attribution.scorers.crossfit.group_key` (the
  source's question id, invisible characters and punctuation ignored) would find
  straddling its two sides;
- groups are stratified by the subsets they contain (algorithm-generated
  only, hand-crafted only, both), and ``round(fraction * groups)`` of each
  stratum are held out, chosen by a seeded shuffle of the sorted group keys.

The split is recorded in a JSON file (:class:`HeldoutSplit`) next to the
script that reports on it; :func:`check_split` recomputes it from the data
and refuses a file that no longer matches.

>>> from attribution.sources.trajectory import Step, Trajectory
>>> t = [Trajectory(id=f"r{i}", query=f"q{i}", steps=[Step(index=0, agent="a", content="")], subset="s")
...      for i in range(10)]
>>> len(heldout_split(t, fraction=0.3, seed=0).heldout_ids)
3
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from attribution.scorers.crossfit import group_key
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.io import write_json_atomic
from descriptor.untrusted import parse_json


class HeldoutSplit(BaseModel):
    """Which record ids are for development and which are held out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int
    fraction: float
    rule: str = "groups by question, stratified by the subsets they contain; round(fraction * groups) per stratum"
    train_ids: list[str]
    heldout_ids: list[str]


def split_group(t: Trajectory) -> str:
    """The question a record belongs to, as the recorded split was drawn (case and whitespace ignored): kept as it
    was, because the split is fixed before any tuning and must be reproducible from the data."""
    q = " ".join(t.query.lower().split())
    return q or f"id:{t.id}"


def heldout_split(trajectories: Sequence[Trajectory], *, fraction: float = 0.3, seed: int = 0) -> HeldoutSplit:
    """The deterministic group-aware, subset-stratified split (see the module docstring)."""
    if not 0.0 < fraction < 1.0:
        raise UserError(f"fraction: expected a number in (0, 1), got {fraction}")
    groups: dict[str, list[Trajectory]] = {}
    for t in sorted(trajectories, key=lambda t: t.id):
        groups.setdefault(split_group(t), []).append(t)
    strata: dict[str, list[str]] = {}
    for key, members in groups.items():
        strata.setdefault("+".join(sorted({m.subset for m in members})), []).append(key)
    rng = random.Random(seed)
    held: set[str] = set()
    for kind in sorted(strata):
        keys = sorted(strata[kind])
        rng.shuffle(keys)
        for key in keys[: round(fraction * len(keys))]:
            held.update(m.id for m in groups[key])
    ids = sorted(t.id for t in trajectories)
    return HeldoutSplit(seed=seed, fraction=fraction, train_ids=[i for i in ids if i not in held],
                        heldout_ids=[i for i in ids if i in held])


def write_split(split: HeldoutSplit, path: str | Path) -> None:
    """Record the split (atomic JSON)."""
    write_json_atomic(path, split.model_dump())


def read_split(path: str | Path) -> HeldoutSplit:
    """Read a recorded split; a missing or malformed file is a ``UserError``."""
    path = Path(path)
    try:
        return HeldoutSplit.model_validate(parse_json(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise UserError(f"{path}: split file not found") from None
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: not a held-out split file ({str(err).splitlines()[0]})") from None


def check_split(recorded: HeldoutSplit, trajectories: Sequence[Trajectory], path: str | Path) -> None:
    """Refuse a recorded split that the data no longer reproduce (records added, removed or renamed)."""
    again = heldout_split(trajectories, fraction=recorded.fraction, seed=recorded.seed)
    if (again.train_ids, again.heldout_ids) != (recorded.train_ids, recorded.heldout_ids):
        raise UserError(f"{path}: the data do not reproduce this split (seed {recorded.seed}, fraction "
                        f"{recorded.fraction}); the data set changed, so earlier held-out figures do not apply")
    held = set(recorded.heldout_ids)
    sides: dict[str, set[bool]] = {}
    for t in trajectories:
        sides.setdefault(group_key(t), set()).add(t.id in held)
    if straddling := sorted(k for k, v in sides.items() if len(v) > 1):
        raise UserError(f"{path}: {len(straddling)} question(s) have records on both sides of this split (by their "
                        f"question id or near-identical text, e.g. {straddling[0][:80]!r}): a scorer trained on "
                        "one side would have seen the other side's question")


def link_records(trajectories: Sequence[Trajectory], ids: set[str], into: str | Path) -> Path:
    """Symlink the Who&When records ``ids`` into ``into/<subset>/``: a Who&When directory of just them, which the
    ``attribute`` and ``score-steps`` jobs read as any other (links already there are kept). Returns ``into``."""
    into = Path(into)
    for t in trajectories:
        if t.id in ids and t.source_path:
            link = into / t.subset / Path(t.source_path).name
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(Path(t.source_path).resolve())
    return into
