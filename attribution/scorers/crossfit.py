"""Cross-fitting: a trained scorer never scores a record it was trained on.

Records are grouped by their normalised query (Who&When reuses some GAIA
questions across subsets, and a model that saw the question's other log
would leak), groups are dealt into ``K`` folds with a seeded shuffle, and
each fold is scored by a model fitted on every other labelled record. With a
separate training set that shares no group with the targets, one model
fitted on it scores everything.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from attribution.scorers.base import StepScores
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError

M = TypeVar("M")


@dataclass(kw_only=True, slots=True, frozen=True)
class Fold:
    """One fit: the ids trained on and the ids scored by that fit (disjoint)."""

    index: int
    train_ids: tuple[str, ...]
    test_ids: tuple[str, ...]


def group_key(t: Trajectory) -> str:
    """Records of the same question share a fold: the source's question id where it gives one, else the question
    text with case, Unicode forms, invisible characters, punctuation and spacing ignored (a copy whose question
    only ends in a zero-width space, or differs in its punctuation, is the same question, and in another fold it
    would train the model that scores it).

    >>> group_key(Trajectory(id="a", query="What is 2+2?\u200b ", steps=[])) == group_key(
    ...     Trajectory(id="b", query="what is 2 + 2", steps=[]))
    True
    """
    if t.question_id:
        return f"qid:{t.question_id.strip()}"
    text = unicodedata.normalize("NFKC", t.query).lower()
    q = "".join(c if c.isalnum() else " " for c in text)
    return " ".join(q.split()) or f"id:{t.id}"


def assign_folds(groups: set[str], folds: int, seed: int) -> dict[str, int]:
    """Each group's fold: the sorted groups shuffled with ``seed`` and dealt into ``min(folds, groups)`` folds."""
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    k = min(folds, len(order))
    return {g: i % k for i, g in enumerate(order)}


def plan_folds(targets: list[Trajectory], train: list[Trajectory], folds: int, seed: int) -> list[Fold]:
    """Fold plan; training ids only ever come from labelled records outside the fold's groups."""
    if len({t.id for t in targets}) != len(targets):
        raise UserError("trajectory ids must be unique to cross-fit")
    target_groups = {group_key(t) for t in targets}
    extra = [t for t in train if t.id not in {x.id for x in targets}]
    labelled_extra = [t for t in extra if t.mistake_step is not None]
    if extra and not target_groups & {group_key(t) for t in extra}:
        if not labelled_extra:
            raise UserError("the training set has no labelled trajectory (mistake_step) to fit on")
        return [Fold(index=0, train_ids=tuple(t.id for t in labelled_extra), test_ids=tuple(t.id for t in targets))]
    if len(target_groups) < 2:
        raise UserError(f"cannot cross-fit {len(targets)} record(s) from one question: give --train-dir")
    fold_of = assign_folds(target_groups, folds, seed)
    k = min(folds, len(target_groups))
    pool = [t for t in (*targets, *extra) if t.mistake_step is not None]
    plan = []
    for i in range(k):
        test = tuple(t.id for t in targets if fold_of[group_key(t)] == i)
        tr = tuple(t.id for t in pool if fold_of.get(group_key(t)) != i)
        if not tr:
            raise UserError(f"fold {i} has no labelled record to train on")
        plan.append(Fold(index=i, train_ids=tr, test_ids=test))
    return plan


def cross_fit(
    targets: list[Trajectory],
    train: list[Trajectory],
    *,
    folds: int,
    seed: int,
    fit: Callable[[list[Trajectory]], M],
    score: Callable[[M, Trajectory], list[float]],
    details: Callable[[M], dict[str, Any]] | None = None,
) -> list[StepScores]:
    """Score every target with a model that never saw it; results in target order."""
    by_id = {t.id: t for t in (*train, *targets)}
    out: dict[str, StepScores] = {}
    for fold in plan_folds(targets, train, folds, seed):
        model = fit([by_id[i] for i in fold.train_ids])
        extra = details(model) if details else {}
        for tid in fold.test_ids:
            t = by_id[tid]
            out[tid] = StepScores(id=tid, n_steps=t.n_steps, step_scores=score(model, t), nfe=0,
                                  details={"fold": fold.index, "n_train": len(fold.train_ids), **extra})
    return [out[t.id] for t in targets]
