"""ECHO: hierarchical context, a panel of objective analysts, confidence-weighted consensus.

Two decoupled passes by the same panel of ``k`` analysts (default 3, sampled
with the seed from six roles, each with its own temperature):

1. agent level (k calls, one per analyst): the analysts see the whole log
   when it fits the route's window (agents are judged on everything they
   did), otherwise the hierarchical view (:mod:`._echo_context`) centred on
   error hotspots. Each returns JSON: summary, per-agent evaluations (error
   likelihood, evidence), a primary conclusion (type, agents, step,
   confidence) and alternative hypotheses. Votes elect the responsible agent.
2. step level (k calls per candidate): up to ``candidates`` (default 3) steps
   of the elected agent are judged, the ones the agent pass proposed first,
   then steps at or just before an error cue, then the earliest. Every
   analyst judges every candidate separately, each time seeing the
   hierarchical context centred on *that* step: L1 (±1) full content, L2
   (±2-3) key decisions, L3 (±4-6) summaries, L4 (the rest) milestones. A
   judgment says whether the step is the decisive error, with a confidence;
   "yes" judgments vote for their step. An agent with a single step skips
   this pass.

Model calls per case: at most ``k * (1 + candidates)`` (12 with the
defaults), ``k`` when the elected agent has one step; a prompt the server
refuses as too long, or a transient failure, is re-sent and counted again.
Every prompt is fitted to the route's context window
(:func:`attribution.prompting.render_steps`).

Voting (:func:`vote`): each candidate's votes (the analyst's confidence; a
conclusion naming several agents splits it among them; alternatives count
half) are summed and normalised to shares of the total. δ = 0.3 applies to
these shares: there is consensus when some candidate holds at least 30% of
the weight, and the heaviest candidate wins. A fragmented panel (no share
reaches δ, or no weight at all) has no consensus: the agent falls back to the
highest mean error likelihood, the step to the agent pass's first proposal.
Steps outside the trajectory are discarded before voting. Disagreement
(:func:`disagreement`) records conclusion diversity, confidence spread and a
review flag when the spread exceeds 0.5.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from attribution.methods._echo_context import hierarchical_views, hotspots, step_types
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.prompting import (
    LLMSession,
    actor_step,
    agent_names,
    case_header,
    display_agent,
    finish,
    heuristic_guess,
    messages,
    new_session,
    render_steps,
    resolve_actor,
    resolve_step,
    s_enum,
    s_list,
    s_obj,
    s_step,
    s_text,
    s_unit,
    step_views,
    steps_of,
    to_unit,
)
from attribution.trajectory import Trajectory

DELTA = 0.3
"""Minimum share of the summed vote weight a candidate needs for consensus (ECHO's δ)."""
ALT_WEIGHT = 0.5
"""Alternative hypotheses vote with this fraction of their confidence."""
REVIEW_SPREAD = 0.5
MAX_CANDIDATES = 3
"""Steps of the elected agent judged in the step pass (each by every analyst, one call each)."""

ROLES: dict[str, tuple[float, str]] = {
    "conservative": (0.3, "You blame an agent only on clear evidence and give low confidence when unsure."),
    "skeptical": (0.4, "You distrust claims in the log and check every result against the task."),
    "detail-focused": (0.5, "You check numbers, code, file names and facts step by step."),
    "general": (0.6, "You judge the overall course of the conversation."),
    "pattern-focused": (0.7, "You look for typical failure patterns: wrong plan, bad handoff, unverified result, loops."),
    "liberal": (0.9, "You consider every plausible culprit and say so."),
}
"""Analyst role -> (temperature, instruction)."""


@dataclass(kw_only=True, slots=True)
class Conclusion:
    agents: list[str]
    step: int | None
    confidence: float
    type: str = ""


@dataclass(kw_only=True, slots=True)
class Analysis:
    """One analyst's parsed reply."""

    role: str
    summary: str = ""
    evaluations: dict[str, float] = field(default_factory=dict)
    """Agent -> error likelihood in [0, 1]."""
    evidence: dict[str, str] = field(default_factory=dict)
    conclusion: Conclusion | None = None
    alternatives: list[Conclusion] = field(default_factory=list)
    discarded_steps: int = 0
    """Proposed steps outside the trajectory, dropped."""


@dataclass(kw_only=True, slots=True)
class VoteResult:
    winner: Hashable | None
    consensus: bool
    """True when some candidate's share of the summed weight reached δ."""
    scores: dict[Any, float]
    """Candidate -> summed vote weight."""
    share: float
    """Winner's fraction of the summed weight."""


def vote(items: Sequence[tuple[Hashable, float]], delta: float = DELTA) -> VoteResult:
    """Confidence-weighted vote: weights are summed per candidate, δ applies to the normalised shares.

    Every vote counts, however small (a two-agent conclusion at 0.5 gives
    each agent 0.25). The heaviest candidate wins; ties go to the candidate
    voted first. ``consensus`` is True when some candidate holds at least
    ``delta`` of the total weight; otherwise the panel is fragmented and
    callers fall back (the heaviest candidate is still reported).

    >>> vote([("a", 0.2), ("a", 0.25), ("b", 0.35)]).winner
    'a'
    >>> vote([("a", 0.6), ("b", 0.5), ("b", 0.4)]).winner
    'b'
    >>> vote([("a", 0.2), ("b", 0.2), ("c", 0.2), ("d", 0.2)]).consensus
    False
    """
    scores: dict[Any, float] = defaultdict(float)
    order: dict[Any, int] = {}
    for n, (cand, w) in enumerate(items):
        order.setdefault(cand, n)
        scores[cand] += max(0.0, float(w))
    if not scores:
        return VoteResult(winner=None, consensus=False, scores={}, share=0.0)
    winner = max(scores, key=lambda c: (scores[c], -order[c]))
    total = sum(scores.values())
    share = scores[winner] / total if total > 0 else 0.0
    # The winner has the largest share, so consensus holds iff it reaches δ.
    return VoteResult(winner=winner, consensus=total > 0 and share >= delta, scores=dict(scores), share=share)


def agent_votes(analyses: Sequence[Analysis]) -> list[tuple[str, float]]:
    """Agent votes: the primary conclusion's agents share its confidence; alternatives count half."""
    items: list[tuple[str, float]] = []
    for a in analyses:
        for concl, factor in [(a.conclusion, 1.0)] + [(alt, ALT_WEIGHT) for alt in a.alternatives]:
            if concl and concl.agents:
                items += [(ag, factor * concl.confidence / len(concl.agents)) for ag in concl.agents]
    return items


def step_votes(analyses: Sequence[Analysis]) -> list[tuple[int, float]]:
    """Step votes from primary conclusions and (half-weight) alternatives; missing steps do not vote."""
    items: list[tuple[int, float]] = []
    for a in analyses:
        for concl, factor in [(a.conclusion, 1.0)] + [(alt, ALT_WEIGHT) for alt in a.alternatives]:
            if concl and concl.step is not None:
                items.append((concl.step, factor * concl.confidence))
    return items


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


def sample_panel(k: int, seed: int) -> list[str]:
    """``k`` distinct analyst roles drawn with ``seed`` (all six, repeated, when k > 6)."""
    names = list(ROLES)
    rng = random.Random(seed)
    if k <= len(names):
        return rng.sample(names, k)
    return [names[i % len(names)] for i in range(k)]


# ------------------------------------------------------------------ parsing


def _conclusion(traj: Trajectory, raw: Any, analysis: Analysis) -> Conclusion | None:
    if not isinstance(raw, dict):
        return None
    names = raw.get("agents", raw.get("agent"))
    names = names if isinstance(names, list) else [names]
    agents = [a for a in (resolve_actor(traj, n) for n in names) if a]
    step = resolve_step(traj, raw.get("step"))
    if step is None and raw.get("step") not in (None, "", "null"):
        analysis.discarded_steps += 1
    return Conclusion(agents=list(dict.fromkeys(agents)), step=step, confidence=to_unit(raw.get("confidence"), 0.5), type=str(raw.get("type", ""))[:60])


def parse_analysis(traj: Trajectory, role: str, obj: dict[str, Any] | None) -> Analysis:
    """An :class:`Analysis` from a reply object; unknown agents and out-of-range steps are dropped."""
    a = Analysis(role=role)
    if not obj:
        return a
    a.summary = str(obj.get("summary", obj.get("reason", "")))[:300]
    evals = obj.get("agents") if isinstance(obj.get("agents"), list) else obj.get("evaluations", [])
    for ev in evals if isinstance(evals, list) else []:
        if isinstance(ev, dict) and (name := resolve_actor(traj, ev.get("agent"))):
            a.evaluations[name] = max(a.evaluations.get(name, 0.0), to_unit(ev.get("error_likelihood"), 0.0))
            a.evidence[name] = str(ev.get("evidence", ""))[:200]
    concl = obj.get("conclusion")
    if not isinstance(concl, dict) and ("step" in obj or "agent" in obj):
        concl = obj  # a flat reply {"agent":..,"step":..,"confidence":..}
    a.conclusion = _conclusion(traj, concl, a)
    alts = obj.get("alternatives", [])
    for alt in alts if isinstance(alts, list) else []:
        if (c := _conclusion(traj, alt, a)) is not None:
            a.alternatives.append(c)
    return a


# ------------------------------------------------------------------ prompts

AGENT_ASK = (
    "Evaluate every agent, then conclude. Reply with JSON only:\n"
    '{"summary": "<one sentence>", "agents": [{"agent": "<name>", "error_likelihood": <0-1>, "evidence": "<short>"}], '
    '"conclusion": {"type": "<error type>", "agents": ["<name>"], "step": <step number>, "confidence": <0-1>}, '
    '"alternatives": [{"agents": ["<name>"], "step": <step number>, "confidence": <0-1>}]}'
)
STEP_ASK = (
    "Is step {step} (by {agent}) the decisive error of this failed run, i.e. the earliest mistake that made the team "
    "fail? Reply with JSON only:\n"
    '{{"summary": "<one sentence>", "type": "<error type or none>", "decisive_error": "yes" or "no", '
    '"confidence": <0-1>}}'
)


def _system(role: str) -> str:
    return (
        f"You are an objective {role} analyst of a failed multi-agent conversation. {ROLES[role][1]} "
        "The decisive error is the earliest step whose mistake made the team fail. Answer in JSON only."
    )


def agent_schema(traj: Trajectory) -> dict[str, Any]:
    """Reply schema of the agent pass (summary and evaluations before the conclusion)."""
    names, last = agent_names(traj), traj.n_steps - 1
    evaluation = s_obj(agent=s_enum(names), error_likelihood=s_unit(), evidence=s_text(80))
    guess = s_obj(agents=s_list(s_enum(names), 1, 1), step=s_step(0, last), confidence=s_unit())
    conclusion = s_obj(type=s_text(40), agents=s_list(s_enum(names), 2, 1), step=s_step(0, last), confidence=s_unit())
    return s_obj(summary=s_text(160), agents=s_list(evaluation, min(len(names), 4), 1), conclusion=conclusion,
                 alternatives=s_list(guess, 2))


def step_schema() -> dict[str, Any]:
    """Reply schema of one step judgment (summary before the verdict)."""
    return s_obj(summary=s_text(160), type=s_text(40), decisive_error=s_enum(["yes", "no"]), confidence=s_unit())


async def _panel(
    session: LLMSession, traj: Trajectory, roles: list[str], stage: str, user_for: Any, focus: set[int],
    schema: dict[str, Any],
) -> list[Analysis]:
    async def one(role: str) -> Analysis:
        meta = {"attr_role": role, "attr_focus": sorted(focus)}
        reply = await session.ask(stage, lambda budget: user_for(role, budget), temperature=ROLES[role][0], meta=meta,
                                  schema=schema)
        return parse_analysis(traj, role, session.parse(stage, reply))

    return list(await asyncio.gather(*(one(r) for r in roles)))


def _agent_view(traj: Trajectory, hot: set[int], budget: int):
    """Agent pass: the whole log when it fits (agents are judged on all they did), else L1-L4 around ``hot``."""
    text, report = render_steps(step_views(traj), budget)
    if report.mode == "full":
        return text, report
    return render_steps(hierarchical_views(traj, hot), budget, focus=hot)


def step_view(traj: Trajectory, step: int, budget: int):
    """Step pass: the hierarchical context centred on ``step`` (L1 ±1 … L4 milestones), fitted to ``budget``."""
    return render_steps(hierarchical_views(traj, {step}), budget, focus={step})


@dataclass(kw_only=True, slots=True)
class Judgment:
    """One analyst's verdict on one candidate step."""

    role: str
    step: int
    decisive: bool | None
    """True/False from the reply, None when it said neither."""
    confidence: float
    type: str = ""
    summary: str = ""


def _yes_no(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        return value.strip().lower().startswith(("y", "true"))
    return None


def parse_judgment(role: str, step: int, obj: dict[str, Any] | None) -> Judgment:
    """A :class:`Judgment` from a reply object (the step is the one asked about, never the reply's)."""
    obj = obj or {}
    verdict = obj.get("decisive_error", obj.get("error", obj.get("decisive")))
    return Judgment(
        role=role, step=step, decisive=_yes_no(verdict), confidence=to_unit(obj.get("confidence"), 0.5),
        type=str(obj.get("type", ""))[:60], summary=str(obj.get("summary", obj.get("reason", "")))[:300],
    )


def judgment_votes(judgments: Sequence[Judgment]) -> list[tuple[int, float]]:
    """Step votes: every "yes" judgment votes for its step with its confidence."""
    return [(j.step, j.confidence) for j in judgments if j.decisive]


def _per_analyst(judgments: Sequence[Judgment], agent: str) -> list[Analysis]:
    """Each analyst's most confident "yes" as its conclusion (for :func:`disagreement`)."""
    by_role: dict[str, list[Judgment]] = defaultdict(list)
    for j in judgments:
        by_role[j.role].append(j)
    out = []
    for role, js in by_role.items():
        yes = [j for j in js if j.decisive]
        best = max(yes, key=lambda j: j.confidence) if yes else None
        concl = Conclusion(agents=[agent], step=best.step, confidence=best.confidence) if best else None
        out.append(Analysis(role=role, conclusion=concl))
    return out


def step_candidates(traj: Trajectory, analyses: Sequence[Analysis], agent: str, limit: int = MAX_CANDIDATES) -> list[int]:
    """Up to ``limit`` of ``agent``'s steps, in step order: proposed by the agent pass (by summed
    weight), then steps at or just before an error cue, then the earliest."""
    own = steps_of(traj, agent)
    weight: dict[int, float] = defaultdict(float)
    for step, w in step_votes(analyses):
        # A proposal of the terminal's output points at the action it reacts to.
        if (s := actor_step(traj, step)) in own:
            weight[s] += w
    proposed = sorted(weight, key=lambda s: (-weight[s], s))
    types = step_types(traj)
    cued = [i for i in own if "error_propagation" in types[i : i + 2]]
    return sorted(list(dict.fromkeys(proposed + cued + own))[: max(1, limit)])


async def judge_steps(
    session: LLMSession, traj: Trajectory, roles: list[str], agent: str, candidates: list[int], header: str,
) -> list[Judgment]:
    """Every analyst judges every candidate, each with the hierarchical view centred on that candidate."""
    note = "Only step {0} and its neighbours are shown in full; (key ...)/(summary)/(milestone ...) lines are shortened."

    async def one(role: str, step: int) -> Judgment:
        who = display_agent(traj.steps[step].agent)

        def build(budget: int):
            text, report = step_view(traj, step, budget - 250)
            user = (f"{header}\n{note.format(step)}\nThe responsible agent is {agent}.\n\nLog:\n{text}\n\n"
                    + STEP_ASK.format(step=step, agent=who))
            return messages(_system(role), user), report

        meta = {"attr_role": role, "attr_step": step, "attr_candidates": candidates}
        reply = await session.ask("step_panel", build, temperature=ROLES[role][0], meta=meta, schema=step_schema())
        return parse_judgment(role, step, session.parse("step_panel", reply))

    out: list[Judgment] = []
    for step in candidates:  # one candidate at a time: k concurrent calls, as in the agent pass
        out += await asyncio.gather(*(one(r, step) for r in roles))
    return out


async def _echo(traj: Trajectory, ctx: MethodContext, k: int, n_candidates: int) -> Prediction:
    session = new_session(ctx, "echo")
    roles = sample_panel(k, ctx.seed)
    header = case_header(traj, ctx.with_ground_truth)
    note = "Lines marked (key ...)/(summary)/(milestone ...) are shortened; missing step numbers were left out."

    hot = hotspots(traj)

    def agent_prompt(role: str, budget: int):
        text, report = _agent_view(traj, hot, budget - 350)
        user = f"{header}\nAgents: {', '.join(agent_names(traj))}\n{note}\n\nLog:\n{text}\n\n{AGENT_ASK}"
        return messages(_system(role), user), report

    first = await _panel(session, traj, roles, "agent_panel", agent_prompt, hot, agent_schema(traj))
    agent, agent_vote, agent_basis = _elect_agent(session, traj, first)

    candidates = step_candidates(traj, first, agent, n_candidates)
    judgments = await judge_steps(session, traj, roles, agent, candidates, header) if len(candidates) > 1 else []
    step_vote = vote(judgment_votes(judgments))
    step, step_basis = step_vote.winner, "consensus"
    if len(candidates) == 1:
        step, step_basis = candidates[0], "single_candidate"
    elif not step_vote.consensus:
        # Nobody (or no clear majority) said "yes": trust the agent pass's ranking.
        step, step_basis = (candidates[0] if candidates else heuristic_guess(traj)[1]), "agent_pass_proposal"
        session.note_fallback("step_panel", "agent_pass_proposal")
    confidence = agent_vote.scores.get(agent, 0.0) / len(roles) if agent_vote.consensus else 0.0
    details = {
        "panel": roles,
        "agent_vote": {"winner": agent, "basis": agent_basis, "scores": agent_vote.scores, "share": agent_vote.share},
        "candidates": candidates,
        "step_vote": {"winner": step, "basis": step_basis, "scores": {str(s): w for s, w in step_vote.scores.items()},
                      "share": step_vote.share},
        "judgments": [{"role": j.role, "step": j.step, "decisive": j.decisive, "confidence": j.confidence} for j in judgments],
        "agent_disagreement": disagreement(first, "agent"),
        "step_disagreement": disagreement(_per_analyst(judgments, agent), "step"),
        "discarded_steps": sum(a.discarded_steps for a in first),
        "summaries": [a.summary for a in first],
    }
    return finish(session, traj, agent, step, confidence, details)


def _elect_agent(session: LLMSession, traj: Trajectory, analyses: Sequence[Analysis]) -> tuple[str | None, VoteResult, str]:
    """The responsible agent: consensus vote, else highest mean error likelihood, else top vote, else heuristic."""
    result = vote(agent_votes(analyses))
    if result.consensus:
        return result.winner, result, "consensus"
    if (agent := _by_likelihood(analyses)) is not None:
        return agent, result, "likelihood"
    if result.winner is not None:
        return result.winner, result, "top_vote"
    session.note_fallback("agent_panel", "heuristic")
    return heuristic_guess(traj)[0], result, "heuristic"


def _by_likelihood(analyses: Sequence[Analysis]) -> str | None:
    """Agent with the highest mean error likelihood over the analysts that evaluated it."""
    sums: dict[str, list[float]] = defaultdict(list)
    for a in analyses:
        for name, p in a.evaluations.items():
            sums[name].append(p)
    if not sums:
        return None
    return max(sums, key=lambda n: sum(sums[n]) / len(sums[n]))


@register_method("echo")
def echo(k: int = 3, candidates: int = MAX_CANDIDATES) -> Method:
    """ECHO with a panel of ``k`` analysts judging up to ``candidates`` steps: at most
    ``k * (1 + candidates)`` model calls per case (12 with the defaults), re-sends not counted."""
    if k < 1:
        raise ValueError(f"echo: k must be >= 1, got {k}")
    if candidates < 1:
        raise ValueError(f"echo: candidates must be >= 1, got {candidates}")

    async def run(traj: Trajectory, ctx: MethodContext) -> Prediction:
        return await _echo(traj, ctx, k, candidates)

    return run
