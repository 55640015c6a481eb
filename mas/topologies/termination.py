"""The termination controller: one decision function for every looped stage.

After each round (debate round, supervisor delegation round, orchestrator
cycle) :func:`decide` runs four checks in this order; the first that holds
stops the loop:

1. ``invalid_or_failed_branch``: non-empty artifacts < ceil(expected_count / 2)
   (blocked or planning-only artifacts still count as present here);
2. ``consensus_reached``: more than one valid answer, winner group / valid
   count >= 0.75 and the majority answer is substantive, where the valid
   count is the answers left after removing the judge's ``invalid_indices``
   (and empty ones): groups ``[[0, 1, 2], [3]]`` with ``[4]`` invalid give
   3 / 4 = 0.75 and stop;
3. ``no_meaningful_change``: comparable previous artifacts exist and another
   round is unlikely to improve correctness;
4. ``max_rounds_reached``.

Consensus and progress come from an LLM judge (``llm_judge`` mode) or, in
``lexical`` mode and whenever the judge is unavailable or answers unusable
JSON, from exact matches of normalised text and a difflib mean delta of the raw text.
Checks 2 and 3 are held back until ``min_rounds`` rounds are done (the
debate's ``minimum_discussion_rounds``); the held-back reason is logged.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Literal

from descriptor.events import Decision
from mas.topologies.node import state_id_of
from mas.topologies.usage import Usage
from mas.tracing import current_tracer

CONSENSUS_THRESHOLD = 0.75
"""Winner share of the valid artifacts that counts as consensus."""
NO_PROGRESS_DELTA = 0.05
"""Lexical no-progress: mean (1 - SequenceMatcher ratio) at or below this stops the loop."""
CONTROLLER = "system:controller"
MISSING_CONFIDENCE = 0.5
"""The seed's confidence of a turn whose confidence is missing or unparsable, or that gave no answer."""

StopReason = Literal["invalid_or_failed_branch", "consensus_reached", "no_meaningful_change", "max_rounds_reached"]
STOP_REASONS: tuple[str, ...] = ("invalid_or_failed_branch", "consensus_reached", "no_meaningful_change",
                                 "max_rounds_reached")

_KEPT = ("L", "M", "N")
"""Unicode categories that stay in the lexical form: letters, marks (a vowel sign, an accent), numbers."""
_SPACES = re.compile(r"\s+")
_BLOCKED = re.compile(r"\b(blocked|cannot (be )?(determine|answer|solve|compute)|can't|unable to|not able to|"
                      r"insufficient (information|data)|not enough information)\b", re.IGNORECASE)
_NO_EVIDENCE = re.compile(r"\b(no evidence|without evidence|not verified|unverified)\b", re.IGNORECASE)
_PLANNING = re.compile(r"^\s*(plan\b|steps?\s*:|i will\b|let me\b|we (will|need to|should)\b|first,? (i|we)\b)"
                       r"|^\s*1\.\s.*(\n|\s)2\.\s", re.IGNORECASE | re.DOTALL)


def normalize_artifact(text: str | None) -> str:
    """Lexical form used for voting: NFKC, case-folded, only letters, marks and numbers of every script kept,
    whitespace collapsed.

    Letters of every script count (three identical Chinese answers agree; they are not empty); combining marks
    count too (Devanagari काम and कम differ by a vowel sign), and a precomposed é equals e + combining acute.

    >>> normalize_artifact("  The Answer:\\n 42! ")
    'the answer 42'
    >>> normalize_artifact("答案是 42。")
    '答案是 42'
    >>> normalize_artifact("काम") == normalize_artifact("कम"), normalize_artifact("caf\\u00e9") == normalize_artifact("cafe\\u0301")
    (False, True)
    """
    if not text:
        return ""
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    kept = "".join(ch if unicodedata.category(ch)[0] in _KEPT else " " if ch.isspace() else "" for ch in folded)
    return _SPACES.sub(" ", kept).strip()


def artifact_kind(text: str | None) -> str:
    """``empty``, ``blocked``, ``no_evidence``, ``planning_only`` or ``direct``.

    >>> [artifact_kind(t) for t in ("", "I cannot determine this", "1. Read. 2. Add.", "42")]
    ['empty', 'blocked', 'planning_only', 'direct']
    """
    if not normalize_artifact(text):
        return "empty"
    t = str(text)
    if _BLOCKED.search(t):
        return "blocked"
    if _NO_EVIDENCE.search(t):
        return "no_evidence"
    if _PLANNING.search(t):
        return "planning_only"
    return "direct"


@dataclass(kw_only=True, frozen=True, slots=True)
class Candidate:
    """One agent's artifact in one round."""

    agent: str
    artifact: str
    confidence: float = MISSING_CONFIDENCE
    reasoning: str = ""
    evidence: int = 0
    """Tool outputs the agent received while producing it."""

    @property
    def valid(self) -> bool:
        """Present (non-empty); blocked or planning-only artifacts are present too."""
        return bool(normalize_artifact(self.artifact))


@dataclass(kw_only=True, slots=True)
class ConsensusView:
    """What the judge (or the lexical fallback) says about one round."""

    groups: list[list[int]]
    """Indices into the consensus artifacts that give the same answer, largest first."""
    invalid_indices: list[int] = field(default_factory=list)
    is_substantive: bool = False
    progress_status: str = "unclear"
    """``improving``, ``stalled`` or ``unclear``."""
    expected_improvement: str = "medium"
    """``high``, ``medium`` or ``low``."""
    should_stop_for_no_progress: bool = False
    explanation: str = ""


@dataclass(kw_only=True, slots=True)
class JudgeOutcome:
    """A judge call: the validated view (None when unusable) and what the call cost."""

    view: ConsensusView | None
    error: str | None = None
    """Why the reply was unusable or the call failed."""
    usage: Usage = Usage()
    """The call's usage (the decision event carries all of it but ``cache_hit`` and ``cost_usd_saved``)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Work:
    """The artifacts a loop would revise when they are not the ones voted on (the orchestrator's workers' parts,
    while the critic and the aggregator vote), with each agent's previous artifact: what progress compares."""

    current: Sequence[Candidate]
    previous: Sequence[Candidate] | None = None


ConsensusJudge = Callable[[Sequence[Candidate], Sequence[Candidate] | None, Work | None], Awaitable[JudgeOutcome]]
"""``(candidates, previous, work) -> JudgeOutcome``: the artifacts voted on, their agents' previous answers, and
the work under revision when it differs from them (else None); see :func:`mas.topologies.judge.consensus_judge`."""


@dataclass(kw_only=True, frozen=True, slots=True)
class LoopPosition:
    """Where the loop is: stage name and rounds counted for the max/min bounds."""

    stage: str
    round: int
    """Rounds done that count against ``max_rounds`` (debate: discussion rounds; 0 = first answers only)."""
    max_rounds: int
    min_rounds: int = 0
    """Rounds before which consensus and no-progress may not stop the loop."""


def lexical_groups(candidates: Sequence[Candidate]) -> list[list[int]]:
    """Indices of the candidates with equal normalised artifacts, largest group first (empty ones in none)."""
    by_norm: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        if norm := normalize_artifact(c.artifact):
            by_norm.setdefault(norm, []).append(i)
    return sorted(by_norm.values(), key=lambda g: (-len(g), g[0]))


def lexical_view(candidates: Sequence[Candidate], previous: Sequence[Candidate] | None,
                 progress_of: Sequence[Candidate] | None = None) -> ConsensusView:
    """Exact votes on normalised text; progress from the difflib mean delta.

    ``progress_of`` are the artifacts compared with ``previous`` (default:
    ``candidates``); the vote may run over other artifacts than the progress.
    """
    groups = lexical_groups(candidates)
    invalid = [i for i, c in enumerate(candidates) if not c.valid]
    winner = candidates[groups[0][0]].artifact if groups else ""
    delta = mean_delta(candidates if progress_of is None else progress_of, previous)
    stalled = delta is not None and delta <= NO_PROGRESS_DELTA + 1e-12  # 1 - 0.95 is 0.050000000000000044 in floats
    return ConsensusView(
        groups=groups, invalid_indices=invalid, is_substantive=artifact_kind(winner) == "direct",
        progress_status="unclear" if delta is None else "stalled" if stalled else "improving",
        expected_improvement="low" if stalled else "medium", should_stop_for_no_progress=stalled,
        explanation="exact match of normalised answers",
    )


def comparable_pairs(candidates: Sequence[Candidate], previous: Sequence[Candidate] | None) -> list[tuple[str, str]]:
    """(previous, current) raw artifacts of agents present with a non-empty artifact in both rounds."""
    if not previous:
        return []
    before = {p.agent: p.artifact for p in previous if p.valid}
    return [(before[c.agent], c.artifact) for c in candidates if c.agent in before and c.valid]


def mean_delta(candidates: Sequence[Candidate], previous: Sequence[Candidate] | None) -> float | None:
    """Mean (1 - SequenceMatcher ratio) of the raw artifacts over comparable pairs; None when there are none.

    Raw text, as the seed has it: a rewording that normalisation would hide ("Answer: 42" -> "answer 42!!!",
    0.27) is a change.

    >>> a = [Candidate(agent="x", artifact="42")]
    >>> mean_delta(a, a), mean_delta(a, None)
    (0.0, None)
    """
    pairs = comparable_pairs(candidates, previous)
    if not pairs:
        return None
    return sum(1.0 - SequenceMatcher(None, p, c).ratio() for p, c in pairs) / len(pairs)


async def _view(mode: str, judge: ConsensusJudge | None, voters: Sequence[Candidate],
                previous: Sequence[Candidate] | None, candidates: Sequence[Candidate],
                call_judge: bool, judge_previous: Sequence[Candidate] | None,
                work: Work | None) -> tuple[ConsensusView, str, JudgeOutcome | None]:
    lexical = lexical_view(voters, previous, progress_of=candidates)
    if mode != "llm_judge":
        return lexical, "lexical", None
    if not call_judge:  # before the minimum rounds no quality stop applies: a judge call could not change anything
        lexical.explanation = "judge not called before the minimum rounds; " + lexical.explanation
        return lexical, "lexical", None
    if judge is None:
        return lexical, "lexical_fallback", JudgeOutcome(view=None, error="no judge configured")
    outcome = await judge(voters, judge_previous, work)
    if outcome.view is not None:
        return outcome.view, "llm_judge", outcome
    return lexical, "lexical_fallback", outcome


async def decide(
    position: LoopPosition,
    *,
    candidate_artifacts: Sequence[Candidate],
    previous_candidate_artifacts: Sequence[Candidate] | None,
    consensus_artifacts: Sequence[Candidate] | None = None,
    previous_consensus_artifacts: Sequence[Candidate] | None = None,
    expected_count: int,
    mode: str = "llm_judge",
    judge: ConsensusJudge | None = None,
) -> Decision:
    """Decide whether the looped stage stops after this round, and why.

    ``consensus_artifacts`` are what the consensus vote runs over (default:
    the candidates); lexical progress always compares the candidates with
    ``previous_candidate_artifacts``. The judge sees the artifacts it votes
    on with *their* previous answers (``previous_consensus_artifacts``;
    without them, the previous candidates of the same agents) and, when the
    vote runs over other artifacts than the candidates, the candidates with
    each agent's previous answer as the work under revision (:class:`Work`),
    so its progress verdict and the lexical one compare the same artifacts
    (the harness README: the judge "sees the current candidate artifacts plus
    each agent's previous answer"). The judge is only called when a
    consensus or progress check could stop the loop (not before
    ``min_rounds``); a judge that is missing (``judge=None`` in ``llm_judge``
    mode) or unusable is recorded as ``consensus_source="lexical_fallback"``
    with ``judge_error`` saying why.

    >>> import asyncio
    >>> c = [Candidate(agent=a, artifact="42") for a in ("a", "b", "c")]
    >>> d = asyncio.run(decide(LoopPosition(stage="debate", round=1, max_rounds=3), candidate_artifacts=c,
    ...                        previous_candidate_artifacts=None, expected_count=3, mode="lexical"))
    >>> d.reason, d.consensus_ratio
    ('consensus_reached', 1.0)
    """
    voters = list(consensus_artifacts if consensus_artifacts is not None else candidate_artifacts)
    judge_previous = _previous_of(voters, previous_consensus_artifacts if consensus_artifacts is not None
                                  else previous_candidate_artifacts, previous_candidate_artifacts)
    valid = sum(c.valid for c in candidate_artifacts)
    required = math.ceil(expected_count / 2)
    d = Decision(
        stage=position.stage, round=position.round, max_rounds=position.max_rounds, min_rounds=position.min_rounds,
        stop=False, reason=None, reason_detail="", consensus_mode=mode, valid_artifact_count=valid,
        expected_count=expected_count, required_valid=required,
        average_confidence=(sum(c.confidence for c in candidate_artifacts) / len(candidate_artifacts)
                            if candidate_artifacts else 0.0),
        mean_delta=mean_delta(candidate_artifacts, previous_candidate_artifacts),
    )
    if valid < required:
        return _stop(d, "invalid_or_failed_branch", f"{valid} valid artifacts < ceil({expected_count}/2) = {required}")

    has_previous = bool(comparable_pairs(candidate_artifacts, previous_candidate_artifacts))
    voter_valid = sum(c.valid for c in voters)
    if voter_valid > 1 or has_previous:
        work = (Work(current=list(candidate_artifacts), previous=previous_candidate_artifacts)
                if consensus_artifacts is not None else None)
        view, source, outcome = await _view(mode, judge, voters, previous_candidate_artifacts, candidate_artifacts,
                                            call_judge=position.round >= position.min_rounds,
                                            judge_previous=judge_previous, work=work)
        _record_view(d, view, source, outcome, voters, has_previous)
        held: list[str] = []
        ratio_ok = d.consensus_valid_count > 1 and d.consensus_ratio >= CONSENSUS_THRESHOLD
        if ratio_ok and view.is_substantive:
            detail = (f"{len(view.groups[0])} of {d.consensus_valid_count} valid artifacts agree "
                      f"(ratio {d.consensus_ratio:.2f} >= {CONSENSUS_THRESHOLD}) and the answer is substantive"
                      + _lexical_note(d))
            if position.round >= position.min_rounds:
                return _stop(d, "consensus_reached", detail)
            held.append("consensus_reached")
        if has_previous and d.should_stop_for_no_progress:
            detail = f"{d.progress_source}: {d.progress_status}, expected improvement {d.expected_improvement}"
            if position.round >= position.min_rounds:
                return _stop(d, "no_meaningful_change", detail)
            held.append("no_meaningful_change")
        d.held_back = ",".join(held) or None
    if position.round >= position.max_rounds:
        return _stop(d, "max_rounds_reached", f"round {position.round} of at most {position.max_rounds}")
    d.reason_detail = (f"continue: {d.held_back} held before minimum {position.min_rounds} rounds"
                       if d.held_back else f"continue: no stop condition after round {position.round}")
    return d


def _lexical_note(d: Decision) -> str:
    """Where the judge's groups and an exact match of the answers disagree, a note saying so (diagnostic)."""
    if d.lexical_groups is None or sorted(map(sorted, d.lexical_groups)) == sorted(map(sorted, d.consensus_groups)):
        return ""
    top = len(d.lexical_groups[0]) if d.lexical_groups else 0
    return f"; by the judge's grouping (lexically, {top} of {d.consensus_valid_count} answers match)"


def _previous_of(voters: Sequence[Candidate], given: Sequence[Candidate] | None,
                 candidates_before: Sequence[Candidate] | None) -> list[Candidate] | None:
    """The previous answers of the agents in ``voters``: ``given``, else those of ``candidates_before`` by agent."""
    names = {v.agent for v in voters}
    before = [p for p in (given if given is not None else candidates_before or []) if p.agent in names]
    return before or None


def _record_view(d: Decision, view: ConsensusView, source: str, outcome: JudgeOutcome | None,
                 voters: Sequence[Candidate], has_previous: bool) -> None:
    # the seed's rule: valid_count = answers left after removing invalid_indices (an empty answer is never valid)
    invalid = set(view.invalid_indices) | {i for i, c in enumerate(voters) if not c.valid}
    valid_count = len(voters) - len(invalid)
    groups = [[i for i in g if i not in invalid] for g in view.groups]
    groups = sorted((g for g in groups if g), key=lambda g: (-len(g), g[0]))
    view.groups = groups
    d.consensus_source = source
    d.consensus_valid_count = valid_count
    d.consensus_groups = [[voters[i].agent for i in g] for g in groups]
    d.consensus_ratio = len(groups[0]) / valid_count if groups and valid_count else 0.0
    d.consensus_answer = voters[groups[0][0]].artifact if groups else None
    d.consensus_explanation = view.explanation
    d.is_substantive = view.is_substantive
    if source == "llm_judge":  # the lexical view beside the judge's, a diagnostic that decides nothing
        lexical = [[voters[i].agent for i in g if i not in invalid] for g in lexical_groups(voters)]
        lexical = sorted((g for g in lexical if g), key=len, reverse=True)
        d.lexical_groups = lexical
        d.lexical_ratio = len(lexical[0]) / valid_count if lexical and valid_count else 0.0
    if has_previous:
        d.progress_source = "llm_judge" if source == "llm_judge" else "lexical"
        d.progress_status = view.progress_status
        d.expected_improvement = view.expected_improvement
        d.should_stop_for_no_progress = view.should_stop_for_no_progress
        d.progress_explanation = view.explanation if source == "llm_judge" else (
            f"mean delta {d.mean_delta:.3f} {'<=' if view.should_stop_for_no_progress else '>'} {NO_PROGRESS_DELTA}")
    if outcome is not None:
        d.judge_error, u = outcome.error, outcome.usage
        d.judge_token_in, d.judge_token_out, d.judge_latency_ms, d.judge_cost_usd = (u.token_in, u.token_out,
                                                                                      u.latency_ms, u.cost_usd)
        d.judge_model, d.judge_route, d.judge_usage_source = u.model, u.route, u.usage_source


def _stop(d: Decision, reason: str, detail: str) -> Decision:
    d.stop, d.reason, d.reason_detail = True, reason, detail
    return d


def emit_decision(decision: Decision, *, state_id: str | None = None,
                  sends: list[dict[str, str]] | None = None) -> None:
    """Trace the decision as a ``verify`` event by ``system:controller`` carrying the judge call's usage
    (``state_id`` default: the running node's checkpoint).

    A continuing decision has ``reason`` null, so descriptor stall listings see only stops.
    """
    payload = Decision.model_validate({**decision.model_dump(exclude={"sends"}), "sends": sends or None})
    current_tracer().emit(CONTROLLER, "verify", payload, token_in=decision.judge_token_in,
                          token_out=decision.judge_token_out, latency_ms=decision.judge_latency_ms,
                          cost_usd=decision.judge_cost_usd, state_id=state_id_of() if state_id is None else state_id,
                          model=decision.judge_model,
                          route=decision.judge_route, usage_source=decision.judge_usage_source)
