"""ECHO's consensus voting as its appendix A.7 writes it, and the decision of the paper variant (ECHO A.1, A.7).

:func:`consensus` runs on the primary conclusions of one pass (the agent pass
or the step pass, ECHO A.1's ``A_agent`` and ``A_step``):

1. a conclusion whose confidence is below δ (0.3) is dropped; the others vote
   with their *stated* conclusion type (``single_agent`` when it states none);
2. the type with the largest summed confidence wins (ties: the type voted
   first); a type summing to 0 never wins;
3. when the winning type is ``single_agent`` or ``multi_agent``, the agents
   its conclusions name collect their confidence; ``single_agent`` keeps the
   agent with the most, ``multi_agent`` keeps every agent whose summed
   confidence reaches δ, most first (every agent a kept multi-agent
   conclusion names does: its confidence alone reaches δ);
4. the winning type's conclusions vote on their ``mistake_step`` the same way;
   the step with the most confidence wins (steps outside the log were
   discarded when the reply was read);
5. the disagreement analysis: the number of conclusion types voted,
   ``high_disagreement`` (more than 2 types, each with votes), the confidence
   spread (max - min over the kept conclusions) and ``requires_review``
   (high disagreement or a spread above 0.5).

The reported confidence is the mean confidence of the winning type's
conclusions. Alternative hypotheses do not vote. A winning type other than
the two yields no attribution, as in A.7.

:func:`decide_paper` is the paper variant's answer from its record: the agent
from the agent pass's consensus (its first agent; every agent of a
multi-agent conclusion is recorded in ``attribution``), the step from the step
pass's consensus. Without consensus there is no prediction, as in A.7
(``fallback="heuristic"`` instead takes the project's chain: the highest mean
error likelihood, then the model-free guess; for the step the step pass's most
supported proposal, then the guess). ``rule="weighted_share"`` replays the
project variant's ``weighted_share`` tally on the same two passes (``scripts/echo_votes.py``);
:func:`decide` replays a record of either variant.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from attribution.methods.echo.vote import (
    ALT_WEIGHT,
    DELTA,
    REVIEW_SPREAD,
    Analysis,
    Ballot,
    Conclusion,
    Decision,
    agent_ballots,
    by_likelihood,
    weighted_share,
)
from attribution.methods.echo.vote import decide as decide_project

SINGLE, MULTI = "single_agent", "multi_agent"
CONCLUSION_TYPES = (SINGLE, MULTI)
"""The primary conclusion types ECHO's analyst prompt offers (A.5)."""
FALLBACKS = ("none", "heuristic")


def stated_type(conclusion: Conclusion) -> str:
    """A conclusion's type as the analyst stated it (case and spaces normalised), ``single_agent`` when absent.

    >>> stated_type(Conclusion(agents=[], step=None, confidence=0.5, type=" Multi_Agent "))
    'multi_agent'
    """
    return "_".join(conclusion.type.strip().lower().split()) or SINGLE


def _ranked(votes: dict[Any, float]) -> list[Any]:
    """Candidates by summed confidence, most first; ties keep the order they were first voted in."""
    return sorted(votes, key=lambda c: votes[c], reverse=True)


@dataclass(kw_only=True, slots=True)
class Consensus:
    """The result of :func:`consensus` (see the module docstring)."""

    type: str | None
    attribution: list[str] | None
    mistake_step: int | None
    confidence: float
    """Mean confidence of the winning type's conclusions (0 without a winner)."""
    type_scores: dict[str, float] = field(default_factory=dict)
    agent_votes: dict[str, float] = field(default_factory=dict)
    step_votes: dict[int, float] = field(default_factory=dict)
    dropped: int = 0
    """Conclusions below δ."""
    disagreement: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        out = asdict(self)
        out["step_votes"] = {str(k): v for k, v in self.step_votes.items()}
        return out


def consensus(conclusions: Sequence[Conclusion | None], delta: float = DELTA) -> Consensus:
    """A.7's vote over one pass's primary conclusions (None: an unreadable reply, which casts no vote).

    A multi-agent ballot outweighs two single-agent ones and keeps both agents it names:

    >>> c = consensus([Conclusion(agents=["Planner", "Coder"], step=3, confidence=0.9, type="multi_agent"),
    ...                Conclusion(agents=["Coder"], step=5, confidence=0.4, type="single_agent"),
    ...                Conclusion(agents=["Verifier"], step=7, confidence=0.4, type="single_agent"),
    ...                Conclusion(agents=["Verifier"], step=7, confidence=0.2, type="single_agent")])
    >>> c.type, c.attribution, c.mistake_step, c.dropped
    ('multi_agent', ['Planner', 'Coder'], 3, 1)
    """
    votes: dict[str, list[Conclusion]] = {}
    dropped = 0
    for c in conclusions:
        if c is None:
            continue
        if c.confidence >= delta:
            votes.setdefault(stated_type(c), []).append(c)
        else:
            dropped += 1
    type_scores = {t: sum(c.confidence for c in vs) for t, vs in votes.items()}
    best, best_score = None, 0.0
    for t, score in type_scores.items():
        if score > best_score:
            best, best_score = t, score
    attribution, step = None, None
    agent_votes: dict[str, float] = defaultdict(float)
    step_votes: dict[int, float] = defaultdict(float)
    if best in CONCLUSION_TYPES:
        for c in votes[best]:
            for agent in c.agents:
                agent_votes[agent] += c.confidence
            if c.step is not None:
                step_votes[c.step] += c.confidence
        ranked = _ranked(agent_votes)
        if ranked:
            attribution = ranked[:1] if best == SINGLE else [a for a in ranked if agent_votes[a] >= delta]
        if step_votes:
            step = _ranked(step_votes)[0]
    kept = [c.confidence for vs in votes.values() for c in vs]
    spread = max(kept) - min(kept) if kept else 0.0
    high = len(votes) > 2 and all(votes.values())
    return Consensus(
        type=best, attribution=attribution, mistake_step=step,
        confidence=best_score / len(votes[best]) if best is not None else 0.0,
        type_scores=type_scores, agent_votes=dict(agent_votes), step_votes=dict(step_votes), dropped=dropped,
        disagreement={"high_disagreement": high, "num_different_conclusions": len(votes),
                      "confidence_spread": round(spread, 4), "requires_review": high or spread > REVIEW_SPREAD},
    )


def step_ballots_of(analyses: Sequence[Analysis]) -> list[Ballot]:
    """The step pass's proposals as ``weighted_share`` ballots: each conclusion's step, alternatives marked."""
    out = []
    for a in analyses:
        for concl, primary in [(a.conclusion, True)] + [(alt, False) for alt in a.alternatives]:
            if concl is not None and concl.step is not None:
                out.append(Ballot(choice=(concl.step,), confidence=concl.confidence, type=concl.type, primary=primary))
    return out


def top_proposal(analyses: Sequence[Analysis]) -> int | None:
    """The step the step pass supports most (conclusions at their confidence, alternatives at ALT_WEIGHT)."""
    weights: dict[int, float] = defaultdict(float)
    for b in step_ballots_of(analyses):
        weights[b.choice[0]] += b.confidence * (1.0 if b.primary else ALT_WEIGHT)  # type: ignore[index]
    return _ranked(weights)[0] if weights else None


@dataclass(kw_only=True, slots=True)
class PaperDecision:
    agent: str | None
    agents: list[str]
    """Every agent of the conclusion (several for a multi-agent one); ``agent`` is the first."""
    step: int | None
    confidence: float
    agent_basis: str
    """``consensus``, or with ``fallback="heuristic"``: ``likelihood`` / ``heuristic``; ``none`` without."""
    step_basis: str
    agent_consensus: Consensus | None = None
    step_consensus: Consensus | None = None


def _share(ballots: list[Ballot], delta: float) -> tuple[Any, float]:
    res = weighted_share(ballots, delta)
    return (res.winner, res.share) if res.consensus else (None, 0.0)


def decide_paper(details: dict[str, Any], rule: str = "paper", delta: float = DELTA) -> PaperDecision:
    """The paper variant's answer under ``rule`` from a prediction's recorded ``details`` (module docstring)."""
    analyses = [Analysis.from_record(a) for a in details["analyses"]]
    step_analyses = [Analysis.from_record(a) for a in details["step_analyses"]]
    agent_c = step_c = None
    if rule == "paper":
        agent_c = consensus([a.conclusion for a in analyses], delta)
        step_c = consensus([a.conclusion for a in step_analyses], delta)
        agents, step, confidence = list(agent_c.attribution or []), step_c.mistake_step, agent_c.confidence
    elif rule == "weighted_share":
        winner, confidence = _share(agent_ballots(analyses), delta)
        agents = [winner] if winner is not None else []
        step = _share(step_ballots_of(step_analyses), delta)[0]
    else:
        raise ValueError(f"unknown vote rule {rule!r}")
    agent_basis = step_basis = "consensus"
    h_agent, h_step = details.get("heuristic") or (None, None)
    heuristic = details.get("fallback", "none") == "heuristic"
    if not agents:
        agent = by_likelihood(analyses) if heuristic else None
        agent_basis = "none" if not heuristic else "likelihood" if agent is not None else "heuristic"
        agents = [agent or h_agent] if heuristic and (agent or h_agent) else []
    if step is None:
        step = (top_proposal(step_analyses) if heuristic else None)
        step_basis = "none" if not heuristic else "proposal" if step is not None else "heuristic"
        step = step if step is not None or not heuristic else h_step
    return PaperDecision(agent=agents[0] if agents else None, agents=agents, step=step, confidence=confidence,
                         agent_basis=agent_basis, step_basis=step_basis, agent_consensus=agent_c,
                         step_consensus=step_c)


def decide(details: dict[str, Any], rule: str = "paper", delta: float = DELTA) -> PaperDecision | Decision:
    """ECHO's answer under ``rule`` from a prediction's recorded ``details``, of either variant (a record without
    ``variant`` is the project's)."""
    if details.get("variant") == "paper":
        return decide_paper(details, rule, delta)
    return decide_project(details, rule, delta)
