"""CHIEF's exemplar retrieval: the most similar decompositions from a small pool, never the case's own.

The pool (``chief_exemplars.json``, built by ``scripts/build_chief_exemplars.py``)
holds 11 records of the Who&When dev split's training part (file number 1
mod 10, at most 40 steps), each with its log as prompts render it and subtasks
written by hand. Similarity is lexical: cosine of log-scaled word counts
(words of 3+ letters, lower case) over the question, the agents and the
rendered log. An exemplar is never retrieved for its own record or for a case
with the same question (:func:`retrieve`), and ``attribute`` leaves the pool's
records out of an evaluation (:func:`is_pool_record`).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

from attribution.sources.trajectory import Trajectory

POOL_PATH = Path(__file__).with_name("chief_exemplars.json")
_WORD_RE = re.compile(r"[a-z]{3,}")


def _key(question: str) -> str:
    return " ".join(_WORD_RE.findall((question or "").lower()))


def _vector(text: str) -> dict[str, float]:
    counts = Counter(_WORD_RE.findall(text.lower()))
    return {w: 1.0 + math.log(c) for w, c in counts.items()}


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    """Cosine similarity of two sparse vectors.

    >>> round(cosine({"a": 1.0}, {"a": 2.0, "b": 2.0}), 3)
    0.707
    """
    dot = sum(v * b.get(w, 0.0) for w, v in a.items())
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


@lru_cache
def load_pool(path: str = str(POOL_PATH)) -> tuple[dict[str, Any], ...]:
    """The exemplars of a pool file (each: id, question, agents, n_steps, log, subtasks)."""
    return tuple(json.loads(Path(path).read_text(encoding="utf-8"))["exemplars"])


def case_text(traj: Trajectory) -> str:
    """What a case is compared by: its question, agents and step texts (each cut to 200 characters)."""
    return " ".join([traj.query, *traj.agents, *((s.content or "")[:200] for s in traj.steps)])


def is_pool_record(traj: Trajectory, pool: tuple[dict[str, Any], ...] | None = None) -> bool:
    """True when ``traj`` is one of the pool's own records (same id and question)."""
    return any(ex["id"] == traj.id and _key(ex["question"]) == _key(traj.query)
               for ex in (pool if pool is not None else load_pool()))


def retrieve(traj: Trajectory, k: int = 2, pool: tuple[dict[str, Any], ...] | None = None) -> list[tuple[dict[str, Any], float]]:
    """The ``k`` exemplars most similar to ``traj`` with their similarity, best first; an exemplar of the same
    record (by id) or of the same question is never returned."""
    pool = pool if pool is not None else load_pool()
    qkey = _key(traj.query)
    allowed = [ex for ex in pool if ex["id"] != traj.id and _key(ex["question"]) != qkey]
    target = _vector(case_text(traj))
    scored = [(ex, cosine(target, _vector(" ".join([ex["question"], *ex["agents"], ex["log"]])))) for ex in allowed]
    scored.sort(key=lambda t: (-t[1], t[0]["id"]))
    return scored[: max(0, k)]
