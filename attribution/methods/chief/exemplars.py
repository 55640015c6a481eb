"""CHIEF's exemplar retrieval: the most similar decompositions from a small pool, never the case's own.

The pool (``exemplars.json`` beside this module, built by ``scripts/build_chief_exemplars.py``)
holds 11 records of the Who&When dev split's training part (file number 1
mod 10, at most 40 steps), each with its log as prompts render it and subtasks
written by hand. A case is compared with an exemplar by the question, the
agents and the rendered log. An exemplar is never retrieved for its own record or for a case
with the same question (:func:`retrieve`), and ``attribute`` leaves the pool's
records out of an evaluation (:func:`is_pool_record`).

Similarity is TF-IDF cosine (scikit-learn's ``TfidfVectorizer``, sublinear
term frequency, words of 3+ letters; fitted on the exemplars a case may be
given), a maintained lexical ranker in place of the earlier hand-written
cosine of log-scaled counts: a word every exemplar shares no longer decides
the ranking. CHIEF A retrieves 2 exemplars by cosine similarity over
embeddings from 165 GAIA and 33 AssistantBench solutions; neither data set
nor an embedding model is shipped here, and ``rank_bm25`` is not a
dependency. The paper variant shows an exemplar as GAIA's entries are (its
question and its numbered steps), the project variant as a log with ranges.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import linear_kernel

from attribution.sources.trajectory import Trajectory

POOL_PATH = Path(__file__).with_name("exemplars.json")
_WORD_RE = re.compile(r"[a-z]{3,}")


def _key(question: str) -> str:
    return " ".join(_WORD_RE.findall((question or "").lower()))


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
    if not allowed or k <= 0:
        return []
    scored = list(zip(allowed, similarities(case_text(traj), [exemplar_text(ex) for ex in allowed]), strict=True))
    scored.sort(key=lambda t: (-t[1], t[0]["id"]))
    return scored[:k]


def exemplar_text(ex: dict[str, Any]) -> str:
    """What an exemplar is compared by: its question, agents and rendered log."""
    return " ".join([ex["question"], *ex["agents"], ex["log"]])


def similarities(query: str, docs: list[str]) -> list[float]:
    """TF-IDF cosine of ``query`` with each of ``docs`` (the vocabulary and IDF fitted on ``docs``).

    >>> [round(x, 2) for x in similarities("the awning table", ["the table", "the awning", "the chair"])]
    [0.76, 0.76, 0.2]
    """
    vectorizer = TfidfVectorizer(token_pattern=r"(?u)\b[a-z]{3,}\b", lowercase=True, sublinear_tf=True)
    try:
        matrix = vectorizer.fit_transform(docs)
    except ValueError:  # no word of 3+ letters in any document
        return [0.0] * len(docs)
    return [float(x) for x in linear_kernel(vectorizer.transform([query]), matrix)[0]]
