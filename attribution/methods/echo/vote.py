"""ECHO's consensus in the project variant: the analysts' parsed outputs, two vote rules, the decision from a record.

This is the vote of ``echo`` with ``variant=project`` (the project's earlier
pipeline: one agent pass, then a judgment per step of the elected agent). The
paper variant votes by :mod:`attribution.methods.echo.consensus` (ECHO A.7 as written: the stated
conclusion type, every agent of a multi-agent conclusion, the step from the
winning conclusions' ``mistake_step``); the records of both share
:class:`Analysis`.

Vote rules (:data:`VOTES`), both confidence-weighted:

- ``paper`` (the default, after ECHO A.7): δ is a *minimum
  confidence*: a ballot below δ is dropped. The kept ballots vote on the
  conclusion **type** first, and the type is read from the ballot:
  ``single_agent`` (the ballot names one agent, or one step) or ``multi_agent``
  (several), never the analyst's free-text wording (this variant's prompt asks
  for an error type in words), which would split agreeing ballots ("wrong
  plan" and "planning error" are one vote); confidence is summed per type and
  the heaviest wins. Then only the ballots of the winning type vote on the
  candidate: a ``multi_agent`` ballot gives *each* agent it names its full
  confidence; confidence summed, the heaviest wins (one agent, where A.7 keeps
  every agent of a multi-agent conclusion). Only primary
  conclusions vote; alternative hypotheses do not. There is consensus when at
  least one ballot clears δ.
- ``weighted_share`` (this project's earlier rule, kept by name): every
  ballot counts however small; alternatives vote at half their confidence;
  a conclusion naming several agents splits its confidence among them;
  weights are summed per candidate and δ applies to the winner's *share* of
  the summed weight (consensus when the heaviest candidate holds ≥ δ).

In both, ties go to the candidate (or type) voted first. The analyst's
free-text type is recorded (``Conclusion.type``) but votes in neither.

The decision (:func:`decide`) is a pure function of what the method records
in ``Prediction.details`` (every analyst's parsed output, every step
judgment, the candidates judged per agent, the model-free fallback), so
``scripts/echo_votes.py`` recomputes a run's predictions under either rule
from the same model outputs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

DELTA = 0.3
"""ECHO's δ: the minimum confidence of a ballot (``paper``), or the winner's minimum share (``weighted_share``)."""
ALT_WEIGHT = 0.5
"""``weighted_share`` only: alternative hypotheses vote with this fraction of their confidence."""
REVIEW_SPREAD = 0.5


@dataclass(kw_only=True, slots=True)
class Conclusion:
    agents: list[str]
    step: int | None
    confidence: float
    type: str = ""


@dataclass(kw_only=True, slots=True)
class Analysis:
    """One analyst's parsed agent-pass reply (agents resolved to the log's, steps inside it)."""

    role: str
    summary: str = ""
    evaluations: dict[str, float] = field(default_factory=dict)
    """Agent -> error likelihood in [0, 1]."""
    evidence: dict[str, str] = field(default_factory=dict)
    conclusion: Conclusion | None = None
    alternatives: list[Conclusion] = field(default_factory=list)
    discarded_steps: int = 0
    """Proposed steps outside the trajectory, dropped."""
    raw: Any = None
    """The reply as parsed (a JSON object), or its clipped text when it held none."""

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> Analysis:
        concl = d.get("conclusion")
        return cls(role=d["role"], summary=d.get("summary", ""), evaluations=dict(d.get("evaluations") or {}),
                   evidence=dict(d.get("evidence") or {}), conclusion=Conclusion(**concl) if concl else None,
                   alternatives=[Conclusion(**c) for c in d.get("alternatives") or []],
                   discarded_steps=d.get("discarded_steps", 0), raw=d.get("raw"))


@dataclass(kw_only=True, slots=True)
class Judgment:
    """One analyst's verdict on one candidate step of ``agent`` (the agent its prompt named responsible)."""

    role: str
    step: int
    decisive: bool | None
    """True/False from the reply, None when it said neither."""
    confidence: float
    type: str = ""
    summary: str = ""
    agent: str | None = None
    raw: Any = None

    def record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True, slots=True)
class Ballot:
    """One vote: the candidates it names (sharing its weight), its confidence and conclusion type."""

    choice: tuple[Hashable, ...]
    confidence: float
    type: str = ""
    primary: bool = True
    """False for an alternative hypothesis."""


@dataclass(kw_only=True, slots=True)
class VoteResult:
    winner: Hashable | None
    consensus: bool
    scores: dict[Any, float]
    """Candidate -> summed vote weight (of the winning type's ballots under ``paper``)."""
    share: float
    """Winner's fraction of ``scores``' total."""
    type: str | None = None
    """``paper``: the winning conclusion type."""
    type_scores: dict[str, float] = field(default_factory=dict)
    dropped: int = 0
    """``paper``: ballots below δ."""

    def record(self) -> dict[str, Any]:
        return {"scores": {str(k): v for k, v in self.scores.items()}, "share": self.share, "type": self.type,
                "type_scores": self.type_scores, "dropped": self.dropped}


def _heaviest(weights: dict[Any, float], order: dict[Any, int]) -> Any:
    return max(weights, key=lambda c: (weights[c], -order[c]))


def _tally(items: Sequence[tuple[Hashable, float]]) -> tuple[dict[Any, float], dict[Any, int]]:
    scores: dict[Any, float] = defaultdict(float)
    order: dict[Any, int] = {}
    for n, (cand, w) in enumerate(items):
        order.setdefault(cand, n)
        scores[cand] += max(0.0, float(w))
    return dict(scores), order


def vote(items: Sequence[tuple[Hashable, float]], delta: float = DELTA) -> VoteResult:
    """The ``weighted_share`` tally: weights summed per candidate, δ on the winner's share of the total.

    >>> vote([("a", 0.2), ("a", 0.25), ("b", 0.35)]).winner
    'a'
    >>> vote([("a", 0.2), ("b", 0.2), ("c", 0.2), ("d", 0.2)]).consensus
    False
    """
    scores, order = _tally(items)
    if not scores:
        return VoteResult(winner=None, consensus=False, scores={}, share=0.0)
    winner = _heaviest(scores, order)
    total = sum(scores.values())
    share = scores[winner] / total if total > 0 else 0.0
    return VoteResult(winner=winner, consensus=total > 0 and share >= delta, scores=scores, share=share)


def weighted_share(ballots: Sequence[Ballot], delta: float = DELTA) -> VoteResult:
    """This project's earlier rule (see the module docstring)."""
    items = [(c, (1.0 if b.primary else ALT_WEIGHT) * b.confidence / len(b.choice)) for b in ballots for c in b.choice]
    return vote(items, delta)


def conclusion_type(ballot: Ballot) -> str:
    """The paper's conclusion type of a ballot: ``single_agent`` (one candidate) or ``multi_agent`` (several).

    >>> conclusion_type(Ballot(choice=("Planner",), confidence=0.6, type="a wrong plan"))
    'single_agent'
    """
    return "single_agent" if len(ballot.choice) == 1 else "multi_agent"


def paper(ballots: Sequence[Ballot], delta: float = DELTA) -> VoteResult:
    """ECHO's rule: drop ballots below δ, vote on the conclusion type, then on the candidate within it.

    Two analysts blame A at 0.6 in different words, one blames B at 0.7: A wins (1.2 against 0.7).

    >>> b = [Ballot(choice=("A",), confidence=0.6, type="wrong plan"),
    ...      Ballot(choice=("A",), confidence=0.6, type="planning error"),
    ...      Ballot(choice=("B",), confidence=0.7, type="bad code"), Ballot(choice=("C",), confidence=0.2)]
    >>> r = paper(b)
    >>> r.type, r.winner, r.dropped
    ('single_agent', 'A', 1)
    """
    kept = [b for b in ballots if b.primary and b.choice and b.confidence >= delta]
    dropped = sum(1 for b in ballots if b.primary and b.choice and b.confidence < delta)
    if not kept:
        return VoteResult(winner=None, consensus=False, scores={}, share=0.0, dropped=dropped)
    type_scores, type_order = _tally([(conclusion_type(b), b.confidence) for b in kept])
    kind = _heaviest(type_scores, type_order)
    # a multi-agent conclusion blames each of its agents with its full confidence
    scores, order = _tally([(c, b.confidence) for b in kept if conclusion_type(b) == kind for c in b.choice])
    winner = _heaviest(scores, order)
    total = sum(scores.values())
    return VoteResult(winner=winner, consensus=True, scores=scores, share=scores[winner] / total if total else 0.0,
                      type=kind, type_scores=type_scores, dropped=dropped)


VOTES: dict[str, Callable[[Sequence[Ballot], float], VoteResult]] = {"paper": paper, "weighted_share": weighted_share}
"""Vote rule name -> rule; ``paper`` is the default."""


def agent_ballots(analyses: Sequence[Analysis]) -> list[Ballot]:
    """Each analyst's primary conclusion naming agents, then its alternatives (``primary=False``)."""
    out = []
    for a in analyses:
        for concl, primary in [(a.conclusion, True)] + [(alt, False) for alt in a.alternatives]:
            if concl and concl.agents:
                out.append(Ballot(choice=tuple(concl.agents), confidence=concl.confidence, type=concl.type,
                                  primary=primary))
    return out


def agent_votes(analyses: Sequence[Analysis]) -> list[tuple[str, float]]:
    """``weighted_share``'s agent items: a conclusion's agents share its confidence; alternatives count half."""
    return [(c, (1.0 if b.primary else ALT_WEIGHT) * b.confidence / len(b.choice))
            for b in agent_ballots(analyses) for c in b.choice]


def step_votes(analyses: Sequence[Analysis]) -> list[tuple[int, float]]:
    """Steps the agent pass proposed, weighted (alternatives half): they rank the step-pass candidates."""
    items: list[tuple[int, float]] = []
    for a in analyses:
        for concl, factor in [(a.conclusion, 1.0)] + [(alt, ALT_WEIGHT) for alt in a.alternatives]:
            if concl and concl.step is not None:
                items.append((concl.step, factor * concl.confidence))
    return items


def step_ballots(judgments: Sequence[Judgment]) -> list[Ballot]:
    """Every "yes" judgment votes for its step with its confidence and type."""
    return [Ballot(choice=(j.step,), confidence=j.confidence, type=j.type) for j in judgments if j.decisive]


def judgment_votes(judgments: Sequence[Judgment]) -> list[tuple[int, float]]:
    """Step votes: every "yes" judgment votes for its step with its confidence."""
    return [(j.step, j.confidence) for j in judgments if j.decisive]


def disagreement(analyses: Sequence[Analysis], key: str) -> dict[str, Any]:
    """Conclusion diversity (distinct conclusions / analysts), confidence spread, review flag."""
    concls = [a.conclusion for a in analyses if a.conclusion]
    if key == "agent":
        labels = {tuple(sorted(c.agents)) for c in concls if c.agents}
    else:
        labels = {c.step for c in concls if c.step is not None}
    confs = [c.confidence for c in concls]
    spread = (max(confs) - min(confs)) if confs else 0.0
    return {
        "conclusion_diversity": len(labels) / len(analyses) if analyses else 0.0,
        "confidence_spread": round(spread, 4),
        "review": spread > REVIEW_SPREAD,
    }


def by_likelihood(analyses: Sequence[Analysis]) -> str | None:
    """Agent with the highest mean error likelihood over the analysts that evaluated it."""
    sums: dict[str, list[float]] = defaultdict(list)
    for a in analyses:
        for name, p in a.evaluations.items():
            sums[name].append(p)
    if not sums:
        return None
    return max(sums, key=lambda n: sum(sums[n]) / len(sums[n]))


def elect_agent(analyses: Sequence[Analysis], rule: str = "paper", delta: float = DELTA,
                heuristic: str | None = None) -> tuple[str | None, VoteResult, str]:
    """The responsible agent and how: consensus, else the highest mean error likelihood, else the top vote,
    else ``heuristic`` (the model-free guess)."""
    result = VOTES[rule](agent_ballots(analyses), delta)
    if result.consensus:
        return result.winner, result, "consensus"  # type: ignore[return-value]
    if (agent := by_likelihood(analyses)) is not None:
        return agent, result, "likelihood"
    if result.winner is not None:
        return result.winner, result, "top_vote"  # type: ignore[return-value]
    return heuristic, result, "heuristic"


def choose_step(judgments: Sequence[Judgment], candidates: list[int], rule: str = "paper", delta: float = DELTA,
                heuristic: int | None = None) -> tuple[int | None, VoteResult, str]:
    """The decisive step among ``candidates`` (judged by ``judgments``) and how it was chosen.

    One candidate needs no vote; without consensus the agent pass's first
    proposal (``candidates[0]``) stands.
    """
    result = VOTES[rule](step_ballots([j for j in judgments if j.step in candidates]), delta)
    if len(candidates) == 1:
        return candidates[0], result, "single_candidate"
    if result.consensus:
        return result.winner, result, "consensus"  # type: ignore[return-value]
    return (candidates[0] if candidates else heuristic), result, "agent_pass_proposal"


@dataclass(kw_only=True, slots=True)
class Decision:
    agent: str | None
    step: int | None
    confidence: float
    agent_vote: VoteResult
    agent_basis: str
    step_vote: VoteResult | None
    step_basis: str
    """``consensus``, ``single_candidate``, ``agent_pass_proposal``, or ``not_judged`` (this rule's agent had
    no step pass in the recorded run)."""


def decide(details: dict[str, Any], rule: str = "paper", delta: float = DELTA) -> Decision:
    """The project variant's answer under ``rule`` from a prediction's recorded ``details`` (see the module
    docstring); :func:`attribution.methods.echo.consensus.decide` takes a record of either variant."""
    analyses = [Analysis.from_record(a) for a in details["analyses"]]
    h_agent, h_step = details.get("heuristic") or (None, None)
    agent, agent_vote, agent_basis = elect_agent(analyses, rule, delta, h_agent)
    confidence = agent_vote.scores.get(agent, 0.0) / max(1, len(analyses)) if agent_vote.consensus else 0.0
    judged = details.get("candidates_by_agent") or {}
    if agent not in judged:
        return Decision(agent=agent, step=None, confidence=confidence, agent_vote=agent_vote, agent_basis=agent_basis,
                        step_vote=None, step_basis="not_judged")
    judgments = [Judgment(**j) for j in details.get("judgments", []) if j.get("agent") == agent]
    step, step_vote, step_basis = choose_step(judgments, list(judged[agent]), rule, delta, h_step)
    return Decision(agent=agent, step=step, confidence=confidence, agent_vote=agent_vote, agent_basis=agent_basis,
                    step_vote=step_vote, step_basis=step_basis)
