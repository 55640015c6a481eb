"""LLM judges for consensus and the final vote, their JSON contracts, and the fallbacks.

Two contracts go to the ``judge`` route (``models.judge``, else default):

- ``judge.consensus`` -> ``{groups, invalid_indices, is_substantive, progress_status,
  expected_improvement, should_stop_for_no_progress, explanation}``;
- ``judge.vote`` -> ``{groups, winner_index, invalid_indices, explanation}``.

A reply that fails validation (not JSON, a missing field, an index out of
range or in two groups, a vote winner with an empty artifact) is unusable:
the caller falls back to lexical voting and records why.

Mock mode (the judge route's model does not judge, ``BoundModel.judges``:
the scripted double, ``--model scripted``) has no LLM judge, as in the seed:
no judge call is made, and consensus and votes are the lexical fallback,
logged as ``lexical_fallback`` with :data:`MOCK_JUDGE` as the reason. The
variant ``scripted:judge`` plays an LLM judge instead (its grouping is
lexical), to test the judge's code path.
:func:`vote_artifacts` is the deterministic vote, which prefers direct,
evidence-backed answers over blocked, planning-only or "no evidence" outputs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from mas.llm.call import actor_seed, call_llm
from mas.llm.schema import bounded_schema
from mas.topologies.agent import RunContext
from mas.topologies.termination import (
    Candidate,
    ConsensusJudge,
    ConsensusView,
    JudgeOutcome,
    Work,
    artifact_kind,
    lexical_view,
    normalize_artifact,
)
from mas.topologies.usage import Usage

JUDGE_ACTOR = "system:judge"
ANSWER_RECIPIENT = "user"
"""Recipient of a final answer that a system actor publishes (the caller of the run)."""
CANDIDATES_HEADER = "Candidates (JSON):"
WORK_HEADER = "Work under revision (JSON):"
MOCK_JUDGE = "mock mode (scripted model): no LLM judge, the lexical fallback decides"
"""``judge_error`` of a decision or vote made in mock mode."""


def is_mock_judge(rt: RunContext) -> bool:
    """True when the ``judge`` route's model does not play the judge (its provider says so: the scripted
    double in mock mode; ``scripted:judge`` and ``scripted:nojudge`` do answer)."""
    return not rt.models.for_role("judge").judges


class ConsensusReply(BaseModel):
    """The ``judge.consensus`` JSON contract."""

    groups: list[list[int]]
    invalid_indices: list[int] = []
    is_substantive: bool
    progress_status: Literal["improving", "stalled", "unclear"]
    expected_improvement: Literal["high", "medium", "low"]
    should_stop_for_no_progress: bool
    explanation: str = ""


class VoteReply(BaseModel):
    """The ``judge.vote`` JSON contract."""

    groups: list[list[int]]
    winner_index: int
    invalid_indices: list[int] = []
    explanation: str = ""


MAX_INDICES = 12
"""Groups and indices a judge reply may list (candidates are agents: 3-5 in practice)."""
MAX_EXPLANATION = 400  # characters

# A constrained small model wrote until the token limit without bounds (see mas.llm.schema).
CONSENSUS_SCHEMA = bounded_schema(ConsensusReply, max_string=MAX_EXPLANATION, max_items=MAX_INDICES)
VOTE_SCHEMA = bounded_schema(VoteReply, max_string=MAX_EXPLANATION, max_items=MAX_INDICES)

CONSENSUS_INSTRUCTIONS = """You judge a multi-agent discussion. Group the candidate answers that state the same final answer
(same value or same meaning, even if worded differently). Mark as invalid any candidate that gives no answer.
Say whether the largest group's answer is substantive: a direct answer to the task, not a refusal, a plan, a
"blocked" status or an admission of missing evidence. Compare each agent's answer with its previous answer
(when given) and judge whether another round of discussion is likely to improve correctness.
Reply with ONLY this JSON:
{"groups": [[<indices>], ...], "invalid_indices": [<indices>], "is_substantive": true|false,
 "progress_status": "improving"|"stalled"|"unclear", "expected_improvement": "high"|"medium"|"low",
 "should_stop_for_no_progress": true|false, "explanation": "<one or two sentences>"}"""

WORK_INSTRUCTIONS = """
The work under revision lists the artifacts another round would revise (each with its agent's previous one); the
candidates vote, the work shows progress: group only the candidates, and judge progress (progress_status,
expected_improvement, should_stop_for_no_progress) on how the work and the candidates changed since their
previous answers."""

VOTE_INSTRUCTIONS = """You pick the final answer of a multi-agent system. Group the candidate answers that state the same
final answer. Prefer a direct answer backed by evidence (tool results, checked reasoning) over refusals, plans,
"blocked" statuses or answers that admit missing evidence; among direct answers prefer the one most agents
support. Mark candidates with no answer as invalid.
Reply with ONLY this JSON:
{"groups": [[<indices>], ...], "winner_index": <index of the chosen candidate>, "invalid_indices": [<indices>],
 "explanation": "<one or two sentences>"}"""


def candidates_json(candidates: Sequence[Candidate], previous: Sequence[Candidate] | None = None) -> str:
    """The candidates as the judge sees them: a JSON array with each agent's previous answer."""
    return json.dumps(candidate_rows(candidates, previous), ensure_ascii=False, indent=1)


def candidate_rows(candidates: Sequence[Candidate], previous: Sequence[Candidate] | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`candidates_json` (also the calls' ``judge_candidates`` metadata)."""
    before = {p.agent: p.artifact for p in previous or []}
    rows = []
    for i, c in enumerate(candidates):
        row: dict[str, Any] = {"index": i, "agent": c.agent, "answer": c.artifact,
                               "confidence": round(c.confidence, 3), "tool_results_received": c.evidence}
        if c.reasoning:
            row["reasoning"] = c.reasoning[:400]
        if c.agent in before:
            row["previous_answer"] = before[c.agent]
        rows.append(row)
    return rows


def work_rows(work: Work | None) -> list[dict[str, Any]]:
    """The work under revision as the consensus judge sees it (also its calls' ``judge_work`` metadata): each
    agent's current and previous artifact."""
    if work is None:
        return []
    before = {p.agent: p.artifact for p in work.previous or []}
    return [{"agent": c.agent, "answer": c.artifact, **({"previous_answer": before[c.agent]} if c.agent in before
                                                       else {})} for c in work.current]


def judge_messages(instructions: str, question: str, candidates: Sequence[Candidate],
                   previous: Sequence[Candidate] | None = None, notes: Sequence[str] = (),
                   work: Work | None = None) -> list[Any]:
    """The judge's prompt; ``notes`` (a rollback's note on the failed continuation) go between task and
    candidates, as they do in an agent's prompt; ``work`` (the consensus judge only) follows the candidates, and
    the instructions say how to read it."""
    told = "".join(f"{n}\n\n" for n in notes)
    shown = f"\n\n{WORK_HEADER}\n{json.dumps(work_rows(work), ensure_ascii=False, indent=1)}" if work else ""
    return [SystemMessage(instructions + (WORK_INSTRUCTIONS if work else "")),
            HumanMessage(f"Task:\n{question}\n\n{told}{CANDIDATES_HEADER}\n{candidates_json(candidates, previous)}"
                         f"{shown}")]


def _check_indices(groups: list[list[int]], invalid: list[int], n: int) -> list[list[int]]:
    """Groups with every index in range and used once; uncovered valid indices become singletons."""
    seen: set[int] = set()
    for i in [*(i for g in groups for i in g), *invalid]:
        if not 0 <= i < n:
            raise ValueError(f"index {i} is out of range for {n} candidates")
        if i in seen:
            raise ValueError(f"index {i} appears twice")
        seen.add(i)
    out = [list(g) for g in groups if g]
    out += [[i] for i in range(n) if i not in seen]
    return out


def parse_consensus(parsed: dict[str, Any] | None, n: int) -> ConsensusView:
    """Validate a ``judge.consensus`` reply; ``ValueError`` when it is unusable."""
    if parsed is None:
        raise ValueError("reply holds no JSON object")
    try:
        r = ConsensusReply.model_validate(parsed)
    except ValidationError as err:
        raise ValueError(f"reply does not match the contract: {err.errors()[0]['loc']} {err.errors()[0]['msg']}") from None
    groups = _check_indices(r.groups, r.invalid_indices, n)
    return ConsensusView(groups=groups, invalid_indices=list(r.invalid_indices), is_substantive=r.is_substantive,
                         progress_status=r.progress_status, expected_improvement=r.expected_improvement,
                         should_stop_for_no_progress=r.should_stop_for_no_progress, explanation=r.explanation[:1000])


def parse_vote(parsed: dict[str, Any] | None, candidates: Sequence[Candidate]) -> VoteReply:
    """Validate a ``judge.vote`` reply; ``ValueError`` when it is unusable.

    A winner with an empty artifact is unusable too: it would leave the run
    without an answer, and the deterministic vote can do better whenever any
    candidate answered.
    """
    n = len(candidates)
    if parsed is None:
        raise ValueError("reply holds no JSON object")
    try:
        r = VoteReply.model_validate(parsed)
    except ValidationError as err:
        raise ValueError(f"reply does not match the contract: {err.errors()[0]['loc']} {err.errors()[0]['msg']}") from None
    r.groups = _check_indices(r.groups, r.invalid_indices, n)
    if not 0 <= r.winner_index < n or r.winner_index in r.invalid_indices:
        raise ValueError(f"winner_index {r.winner_index} is not a valid candidate")
    if not normalize_artifact(candidates[r.winner_index].artifact):
        raise ValueError(f"winner_index {r.winner_index} names an empty artifact")
    return r


def consensus_judge(rt: RunContext) -> ConsensusJudge:
    """The ``llm_judge`` consensus judge of this run (the ``judge`` route)."""

    async def judge(candidates: Sequence[Candidate], previous: Sequence[Candidate] | None,
                    work: Work | None = None) -> JudgeOutcome:
        if is_mock_judge(rt):
            return JudgeOutcome(view=None, error=MOCK_JUDGE)
        # A failed call (LLMCallError) ends the run as an infrastructure error; only an unusable reply falls back.
        res = await call_llm(rt.models.for_role("judge"), judge_messages(CONSENSUS_INSTRUCTIONS, rt.question,
                                                                         candidates, previous, work=work),
                             contract="judge.consensus", actor=JUDGE_ACTOR, step=None,
                             json_schema=CONSENSUS_SCHEMA, temperature=0.0,
                             metadata={"judge_candidates": candidate_rows(candidates, previous),
                                       **({"judge_work": work_rows(work)} if work else {})})
        usage = Usage.of(res)
        try:
            return JudgeOutcome(view=parse_consensus(res.parsed, len(candidates)), usage=usage)
        except ValueError as err:
            return JudgeOutcome(view=None, error=f"unusable judge reply: {err}"[:500], usage=usage)

    return judge


@dataclass(kw_only=True, slots=True)
class VoteOutcome:
    """The final vote: the winning candidate and how it was chosen."""

    winner_index: int
    groups: list[list[int]]
    invalid_indices: list[int] = field(default_factory=list)
    explanation: str = ""
    source: str = "lexical"
    """``llm_judge``, ``lexical`` or ``lexical_fallback``."""
    error: str | None = None
    usage: Usage = Usage()
    """The judge call's usage (its model and route None: no call was made, :attr:`by_model`)."""
    shown_order: list[int] | None = None
    """The candidates' indices in the order the judge model saw them (None: no judge model saw them)."""

    @property
    def by_model(self) -> bool:
        """A judge model was called for this vote (its reply decided, or was unusable and the lexical vote did)."""
        return self.usage.route is not None

    def envelope(self) -> dict[str, Any]:
        """The trace event fields of the judge call behind this vote (usage, model, route, cache)."""
        return self.usage.envelope()


def vote_artifacts(candidates: Sequence[Candidate]) -> VoteOutcome:
    """Deterministic vote: group by normalised answer, rank groups by (direct answer, evidence, size,
    total confidence, earliest), and return the group's most confident member.

    Empty artifacts form no group, so one wins only when every candidate is empty.

    >>> c = [Candidate(agent="a", artifact="I cannot determine it"), Candidate(agent="b", artifact="I cannot determine it"),
    ...      Candidate(agent="c", artifact="42", evidence=2)]
    >>> vote_artifacts(c).winner_index
    2
    """
    if not candidates:
        raise ValueError("vote_artifacts needs at least one candidate")
    view = lexical_view(candidates, None)
    groups = view.groups or [[i] for i in range(len(candidates))]

    def rank(g: list[int]) -> tuple[Any, ...]:
        kind = artifact_kind(candidates[g[0]].artifact)
        return (kind == "direct", any(candidates[i].evidence for i in g), len(g),
                sum(candidates[i].confidence for i in g), -g[0])

    best = max(groups, key=rank)
    winner = max(best, key=lambda i: (candidates[i].confidence, candidates[i].evidence, -i))
    kind = artifact_kind(candidates[winner].artifact)
    return VoteOutcome(winner_index=winner, groups=groups, invalid_indices=view.invalid_indices,
                       explanation=f"{len(best)} of {len(candidates)} agree on a {kind} answer", source="lexical")


VOTE_ORDER_ACTOR = "system:judge:vote-order"
"""The name the candidates' shuffle draws its seed by (:func:`mas.llm.call.actor_seed`)."""


def shown_order(run_seed: int, n: int, vote: str = "", task: str = "") -> list[int]:
    """The order a judge model sees ``n`` candidates in: a permutation drawn from the run's seed, ``task`` (the
    task's id) and ``vote``, the vote's name within the run (``""``: the final vote; an election names its group).

    A judge that favours a position (the 0.5B embedded model chose the second of two candidates in every vote
    of a 100-run sweep) would otherwise favour whichever agent is listed there, and that would read as the agent
    being better. Shuffled, the bias becomes noise the vote audit can measure apart from the agents
    (:mod:`descriptor.judge_audit`). A function of the run's seed, so a run replays exactly and a rollback, which
    draws with a seed of its own, shows the candidates anew. Each vote of a run draws its own order: with one
    order for all, a run's two elections showed their members in the same positions, so its votes were not
    independent trials of the judge's position bias (the audit's exact test counts them as such). The task is
    drawn in too: run seeds are the same for every task (``seed * 10_007 + r``), so without it run ``r`` of every
    task showed its candidates in one order, and a judge's lean towards a position fell on the same agent across
    the whole experiment.
    """
    order = list(range(n))
    name = f"{VOTE_ORDER_ACTOR}:{vote}" if vote else VOTE_ORDER_ACTOR
    random.Random(actor_seed(run_seed, f"{name}|{task}" if task else name)).shuffle(order)
    return order


async def final_vote(rt: RunContext, candidates: Sequence[Candidate], mode: str | None = None,
                     notes: Sequence[str] = (), vote: str = "") -> VoteOutcome:
    """A vote by ``mode`` (default ``mas.final_vote_mode``): the LLM judge, else (or when its reply is unusable)
    :func:`vote_artifacts`. A judge call that fails for good raises (the run is an infrastructure error).
    ``notes``: what the judge is told besides the task (a rollback's note). The judge model sees the candidates
    in :func:`shown_order` (``vote``: the vote's name within the run, drawn with the run's task); the outcome's
    indices are the candidates' own."""
    if (mode or rt.cfg.mas.final_vote_mode) != "llm_judge":
        return vote_artifacts(candidates)
    if is_mock_judge(rt):
        out = vote_artifacts(candidates)
        out.source, out.error = "lexical_fallback", MOCK_JUDGE
        return out
    order = shown_order(rt.models.seed, len(candidates), vote, rt.task_id)
    shown = [candidates[i] for i in order]
    # A failed call (LLMCallError) ends the run as an infrastructure error; only an unusable reply falls back.
    res = await call_llm(rt.models.for_role("judge"),
                         judge_messages(VOTE_INSTRUCTIONS, rt.question, shown, notes=notes),
                         contract="judge.vote", actor=JUDGE_ACTOR, step=None, json_schema=VOTE_SCHEMA, temperature=0.0,
                         metadata={"judge_candidates": candidate_rows(shown)})
    usage = Usage.of(res)
    try:
        r = parse_vote(res.parsed, shown)
    except ValueError as err:
        out = vote_artifacts(candidates)
        out.source, out.error = "lexical_fallback", f"unusable judge reply: {err}"[:500]
        out.usage, out.shown_order = usage, order
        return out
    return VoteOutcome(winner_index=order[r.winner_index], groups=[[order[i] for i in g] for g in r.groups],
                       invalid_indices=[order[i] for i in r.invalid_indices], explanation=r.explanation[:1000],
                       source="llm_judge", shown_order=order, usage=usage)
