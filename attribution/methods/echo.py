"""ECHO: hierarchical context, a panel of objective analysts, confidence-weighted consensus.

Two decoupled passes, each by the same panel of ``k`` analysts (default 3,
sampled with the seed from six roles, each with its own temperature):

1. agent level: the analysts see the log (whole when it fits, otherwise the
   hierarchical context around error hotspots, :mod:`._echo_context`) and
   return JSON: summary, per-agent evaluations (error likelihood, evidence),
   a primary conclusion (type, agents, step, confidence) and alternative
   hypotheses. Votes elect the responsible agent.
2. step level: the analysts see the hierarchical context focused on that
   agent's steps and return the decisive step with a confidence and
   alternatives. Votes elect the step.

Voting (:func:`vote`): a vote counts only if its weight (the analyst's
confidence; alternatives count half) reaches δ = 0.3; the candidate with the
largest summed weight wins. When no vote reaches δ there is no consensus: the
agent falls back to the highest mean error likelihood, the step to the single
most confident proposal. Steps outside the trajectory are discarded before
voting. Disagreement (:func:`disagreement`) records conclusion diversity,
confidence spread and a review flag when the spread exceeds 0.5.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from attribution.methods import _scripted  # noqa: F401  (scripted responders)
from attribution.methods._echo_context import hierarchical_views, hotspots
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.prompting import (
    LLMSession,
    agent_names,
    case_header,
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
"""Minimum weight of a counted vote (ECHO's consensus threshold δ)."""
ALT_WEIGHT = 0.5
"""Alternative hypotheses vote with this fraction of their confidence."""
REVIEW_SPREAD = 0.5
MAX_STEP_FOCUS = 8
"""Steps of the elected agent given full context in the step pass (proposed ones, then earliest)."""

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
    """True when at least one vote reached δ."""
    scores: dict[Any, float]
    share: float
    """Winner's fraction of the counted weight (0 without consensus)."""


def vote(items: Sequence[tuple[Hashable, float]], delta: float = DELTA) -> VoteResult:
    """Confidence-weighted vote: weights below ``delta`` do not count; largest summed weight wins.

    Ties go to the candidate voted first. Without any counted vote the
    heaviest single item wins with ``consensus=False``.

    >>> vote([("a", 0.2), ("a", 0.25), ("b", 0.35)]).winner
    'b'
    >>> vote([("a", 0.6), ("b", 0.5), ("b", 0.4)]).winner
    'b'
    """
    scores: dict[Any, float] = defaultdict(float)
    order: dict[Any, int] = {}
    for n, (cand, w) in enumerate(items):
        order.setdefault(cand, n)
        if w >= delta:
            scores[cand] += w
    if scores:
        winner = max(scores, key=lambda c: (scores[c], -order[c]))
        return VoteResult(winner=winner, consensus=True, scores=dict(scores), share=scores[winner] / sum(scores.values()))
    if not items:
        return VoteResult(winner=None, consensus=False, scores={}, share=0.0)
    best = max(range(len(items)), key=lambda n: (items[n][1], -n))
    return VoteResult(winner=items[best][0], consensus=False, scores={}, share=0.0)


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
    "Which step of {agent} is the decisive error? Reply with JSON only:\n"
    '{{"summary": "<one sentence>", "conclusion": {{"step": <step number>, "confidence": <0-1>}}, '
    '"alternatives": [{{"step": <step number>, "confidence": <0-1>}}]}}'
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


def step_schema(traj: Trajectory) -> dict[str, Any]:
    """Reply schema of the step pass."""
    guess = s_obj(step=s_step(0, traj.n_steps - 1), confidence=s_unit())
    return s_obj(summary=s_text(160), conclusion=guess, alternatives=s_list(guess, 2))


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


def _views(traj: Trajectory, focus: set[int], budget: int):
    """Whole log when it fits, else the hierarchical context around ``focus``."""
    text, report = render_steps(step_views(traj), budget)
    if report.mode == "full":
        return text, report
    return render_steps(hierarchical_views(traj, focus), budget, focus=focus)


async def _echo(traj: Trajectory, ctx: MethodContext, k: int) -> Prediction:
    session = new_session(ctx, "echo")
    roles = sample_panel(k, ctx.seed)
    header = case_header(traj, ctx.with_ground_truth)
    note = "Lines marked (key ...)/(summary)/(milestone ...) are shortened; missing step numbers were left out."

    hot = hotspots(traj)

    def agent_prompt(role: str, budget: int):
        text, report = _views(traj, hot, budget - 350)
        user = f"{header}\nAgents: {', '.join(agent_names(traj))}\n{note}\n\nLog:\n{text}\n\n{AGENT_ASK}"
        return messages(_system(role), user), report

    first = await _panel(session, traj, roles, "agent_panel", agent_prompt, hot, agent_schema(traj))
    agent_vote = vote(agent_votes(first))
    agent, agent_basis = agent_vote.winner, "consensus" if agent_vote.consensus else "top_vote"
    if agent is None:
        agent, agent_basis = _by_likelihood(first), "likelihood"
    if agent is None:
        agent, _ = heuristic_guess(traj)
        agent_basis = "heuristic"
        session.note_fallback("agent_panel", "heuristic")

    own = steps_of(traj, agent)
    focus = step_focus(first, agent, own) or hot

    def step_prompt(role: str, budget: int):
        text, report = _views(traj, focus, budget - 250)
        listed = ", ".join(str(i) for i in own[:20]) or "none"
        user = f"{header}\n{note}\nThe responsible agent is {agent} (its steps: {listed}).\n\nLog:\n{text}\n\n{STEP_ASK.format(agent=agent)}"
        return messages(_system(role), user), report

    second = await _panel(session, traj, roles, "step_panel", step_prompt, focus, step_schema(traj))
    step_vote = vote(step_votes(second))
    step, step_basis = step_vote.winner, "consensus" if step_vote.consensus else "top_vote"
    if step is None:
        step, step_basis = (own[0] if own else heuristic_guess(traj)[1]), "first_step_of_agent"
        session.note_fallback("step_panel", "first_step_of_agent")
    confidence = agent_vote.scores.get(agent, 0.0) / len(roles) if agent_vote.consensus else 0.0
    details = {
        "panel": roles,
        "agent_vote": {"winner": agent, "basis": agent_basis, "scores": agent_vote.scores, "share": agent_vote.share},
        "step_vote": {"winner": step, "basis": step_basis, "scores": {str(s): w for s, w in step_vote.scores.items()}},
        "agent_disagreement": disagreement(first, "agent"),
        "step_disagreement": disagreement(second, "step"),
        "discarded_steps": sum(a.discarded_steps for a in first + second),
        "summaries": [a.summary for a in first],
    }
    return finish(session, traj, agent, step, confidence, details)


def step_focus(analyses: Sequence[Analysis], agent: str, own: list[int]) -> set[int]:
    """Steps given full context in the step pass: the agent's steps the analysts proposed, then its earliest."""
    proposed = [
        c.step
        for a in analyses
        for c in ([a.conclusion] if a.conclusion else []) + a.alternatives
        if c.step is not None and c.step in own
    ]
    return set(list(dict.fromkeys(proposed + own))[:MAX_STEP_FOCUS])


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
def echo(k: int = 3) -> Method:
    """ECHO with a panel of ``k`` analysts (2k model calls per case)."""
    if k < 1:
        raise ValueError(f"echo: k must be >= 1, got {k}")

    async def run(traj: Trajectory, ctx: MethodContext) -> Prediction:
        return await _echo(traj, ctx, k)

    return run
