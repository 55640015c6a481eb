"""ECHO: hierarchical context, a panel of objective analysts, confidence-weighted consensus.

Two decoupled passes by the same panel of ``k`` analysts (default 3, sampled
with the seed from six roles, each with its own temperature):

1. agent level (k calls, one per analyst): the analysts see the whole log
   when it fits the route's window (agents are judged on everything they
   did), otherwise the hierarchical view (:mod:`._echo_context`) centred on
   error hotspots. Each returns JSON: summary, per-agent evaluations (error
   likelihood, evidence), a primary conclusion (type, agents, step,
   confidence) and alternative hypotheses. Votes elect the responsible agent.
2. step level (k calls per candidate): every step of the elected agent is
   judged (``candidates=0``, the default, as the paper's step pass covers the
   agent's steps); ``candidates=N`` keeps the first N by priority (the ones
   the agent pass proposed, then steps at or just before an error cue, then
   the earliest; the project's earlier default was 3). Every
   analyst judges every candidate separately, each time seeing the
   hierarchical context centred on *that* step: L1 (±1) full content, L2
   (±2-3) key reasoning chains, L3 (±4-6) outcome, assumptions and warnings,
   L4 (the rest) milestones (:mod:`._echo_context`). A
   judgment says whether the step is the decisive error, with a confidence;
   "yes" judgments vote for their step. An agent with a single step skips
   this pass.

Model calls per case: at most ``k * (1 + s)``, ``s`` the elected agent's
steps (or ``candidates`` when set), ``k`` when the agent has one step; a prompt the server
refuses as too long, or a transient failure, is re-sent and counted again.
Every prompt is fitted to the route's context window
(:func:`attribution.llm.prompting.render_steps`).

Voting (:mod:`._echo_vote`): ``vote="paper"`` (the default) is ECHO's rule as
its paper defines it: δ = 0.3 is a minimum confidence (ballots below it are
dropped), the kept ballots vote on the conclusion type first, and only the
winning type's ballots elect the agent (and, in the step pass, the step);
alternative hypotheses do not vote. ``vote="weighted_share"`` is this
project's earlier rule, kept by name: every ballot counts, alternatives at
half weight, and δ applies to the winner's share of the summed weight. A
panel without consensus falls back: the agent to the highest mean error
likelihood, the step to the agent pass's first proposal. Steps outside the
trajectory are discarded before voting. Disagreement records conclusion
diversity, confidence spread and a review flag when the spread exceeds 0.5.

Every analyst's parsed output (``details.analyses``), every step judgment
(``details.judgments``), the candidates judged per agent and the model-free
fallback are recorded, and the answer is :func:`._echo_vote.decide` of that
record, so ``scripts/echo_votes.py`` recomputes a run under either rule from
the same model outputs. With ``compare_votes=True`` the step pass also judges
the candidates of the agent the other rule elects, when it differs (their
calls are real and counted in the case's NFE), so the step under both rules
is known for every case.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from attribution.llm.scripted_log import agents_in, first_marked, marked
from attribution.llm.prompt_fit import clip
from attribution.llm.calls import CaseLedger, new_ledger
from attribution.methods._echo_context import hierarchical_views, hotspots, step_types
from attribution.methods._echo_vote import (
    DELTA,
    VOTES,
    Analysis,
    Conclusion,
    Judgment,
    decide,
    disagreement,
    elect_agent,
    step_votes,
)
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.llm.prompting import (
    actor_step,
    agent_names,
    case_header,
    display_agent,
    finish,
    heuristic_guess,
    messages,
    render_steps,
    resolve_actor,
    resolve_step,
    step_views,
    steps_of,
)
from attribution.llm.replies import YesNo, contract, many, one_of, schema_of, step_in, text, unit
from attribution.sources.trajectory import Trajectory
from mas.llm.scripting import ScriptedContext, responder
from mas.llm.confidence import parse_confidence

MAX_CANDIDATES = 3
"""The project's earlier step-pass limit (``candidates=3``); the default now judges every step of the agent."""
"""Steps of the elected agent judged in the step pass (each by every analyst, one call each)."""
RAW_CHARS = 600
"""Characters kept of a reply that held no JSON object (``raw``)."""

ROLES: dict[str, tuple[float, str]] = {
    "conservative": (0.3, "You blame an agent only on clear evidence and give low confidence when unsure."),
    "skeptical": (0.4, "You distrust claims in the log and check every result against the task."),
    "detail-focused": (0.5, "You check numbers, code, file names and facts step by step."),
    "general": (0.6, "You judge the overall course of the conversation."),
    "pattern-focused": (0.7, "You look for typical failure patterns: wrong plan, bad handoff, unverified result, loops."),
    "liberal": (0.9, "You consider every plausible culprit and say so."),
}
"""Analyst role -> (temperature, instruction)."""


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
    return Conclusion(agents=list(dict.fromkeys(agents)), step=step, confidence=parse_confidence(raw.get("confidence"), 0.5), type=str(raw.get("type", ""))[:60])


def parse_analysis(traj: Trajectory, role: str, obj: dict[str, Any] | None) -> Analysis:
    """An :class:`Analysis` from a reply object; unknown agents and out-of-range steps are dropped."""
    a = Analysis(role=role, raw=obj)
    if not obj:
        return a
    a.summary = str(obj.get("summary", obj.get("reason", "")))[:300]
    evals = obj.get("agents") if isinstance(obj.get("agents"), list) else obj.get("evaluations", [])
    for ev in evals if isinstance(evals, list) else []:
        if isinstance(ev, dict) and (name := resolve_actor(traj, ev.get("agent"))):
            a.evaluations[name] = max(a.evaluations.get(name, 0.0), parse_confidence(ev.get("error_likelihood"), 0.0))
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


def agent_contract(traj: Trajectory) -> Any:
    """Reply contract of the agent pass (summary and evaluations before the conclusion)."""
    names, last = agent_names(traj), traj.n_steps - 1
    evaluation = contract("Evaluation", agent=one_of(names), error_likelihood=unit(), evidence=text(80))
    guess = contract("Guess", agents=many(one_of(names), 1, 1), step=step_in(0, last), confidence=unit())
    conclusion = contract("Conclusion", type=text(40), agents=many(one_of(names), 2, 1), step=step_in(0, last),
                          confidence=unit())
    return contract("AgentPanelReply", summary=text(160), agents=many(evaluation, min(len(names), 4), 1),
                    conclusion=conclusion, alternatives=many(guess, 2))


StepJudgmentReply = contract("StepJudgmentReply", summary=text(160), type=text(40), decisive_error=YesNo,
                             confidence=unit())
"""Reply contract of one step judgment (summary before the verdict)."""


def agent_schema(traj: Trajectory) -> dict[str, Any]:
    return schema_of(agent_contract(traj))


def step_schema() -> dict[str, Any]:
    return schema_of(StepJudgmentReply)


async def _panel(
    ledger: CaseLedger, traj: Trajectory, roles: list[str], stage: str, user_for: Any, focus: set[int],
    schema: dict[str, Any],
) -> list[Analysis]:
    async def one(role: str) -> Analysis:
        meta = {"attr_role": role, "attr_focus": sorted(focus)}
        reply = await ledger.ask(stage, lambda budget: user_for(role, budget), temperature=ROLES[role][0], meta=meta,
                                  schema=schema)
        obj = ledger.parse(stage, reply)
        a = parse_analysis(traj, role, obj)
        if obj is None:
            a.raw = clip(reply, RAW_CHARS)
        return a

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


def _yes_no(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        return value.strip().lower().startswith(("y", "true"))
    return None


def parse_judgment(role: str, step: int, obj: dict[str, Any] | None, agent: str | None = None) -> Judgment:
    """A :class:`Judgment` from a reply object (the step is the one asked about, never the reply's)."""
    raw = obj
    obj = obj or {}
    verdict = obj.get("decisive_error", obj.get("error", obj.get("decisive")))
    return Judgment(
        role=role, step=step, decisive=_yes_no(verdict), confidence=parse_confidence(obj.get("confidence"), 0.5),
        type=str(obj.get("type", ""))[:60], summary=str(obj.get("summary", obj.get("reason", "")))[:300],
        agent=agent, raw=raw,
    )


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
    """Up to ``limit`` of ``agent``'s steps (``limit`` 0: all of them), in step order, chosen by priority: proposed
    by the agent pass (by summed weight), then steps at or just before an error cue, then the earliest."""
    own = steps_of(traj, agent)
    weight: dict[int, float] = defaultdict(float)
    for step, w in step_votes(analyses):
        # A proposal of the terminal's output points at the action it reacts to.
        if (s := actor_step(traj, step)) in own:
            weight[s] += w
    proposed = sorted(weight, key=lambda s: (-weight[s], s))
    types = step_types(traj)
    cued = [i for i in own if "error_propagation" in types[i : i + 2]]
    ranked = list(dict.fromkeys(proposed + cued + own))
    return sorted(ranked if limit == 0 else ranked[: max(1, limit)])


async def judge_steps(
    ledger: CaseLedger, traj: Trajectory, roles: list[str], agent: str, candidates: list[int], header: str,
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
        reply = await ledger.ask("step_panel", build, temperature=ROLES[role][0], meta=meta, schema=step_schema())
        obj = ledger.parse("step_panel", reply)
        judgment = parse_judgment(role, step, obj, agent)
        if obj is None:
            judgment.raw = clip(reply, RAW_CHARS)
        return judgment

    out: list[Judgment] = []
    for step in candidates:  # one candidate at a time: k concurrent calls, as in the agent pass
        out += await asyncio.gather(*(one(r, step) for r in roles))
    return out


async def _echo(traj: Trajectory, ctx: MethodContext, k: int, n_candidates: int, rule: str, delta: float,
                compare_votes: bool) -> Prediction:
    ledger = new_ledger(ctx, "echo")
    roles = sample_panel(k, ctx.seed)
    header = case_header(traj, ctx.with_ground_truth)
    note = "Lines marked (key ...)/(summary)/(milestone ...) are shortened; missing step numbers were left out."

    hot = hotspots(traj)

    def agent_prompt(role: str, budget: int):
        text, report = _agent_view(traj, hot, budget - 350)
        user = f"{header}\nAgents: {', '.join(agent_names(traj))}\n{note}\n\nLog:\n{text}\n\n{AGENT_ASK}"
        return messages(_system(role), user), report

    first = await _panel(ledger, traj, roles, "agent_panel", agent_prompt, hot, agent_schema(traj))
    heuristic = heuristic_guess(traj)
    # The agents to judge steps of: this rule's, and with compare_votes the other rule's too.
    rules = [rule] + ([r for r in VOTES if r != rule] if compare_votes else [])
    judged: dict[str, list[int]] = {}
    judgments: list[Judgment] = []
    for r in rules:
        agent = elect_agent(first, r, delta, heuristic[0])[0]
        if agent is None or agent in judged:
            continue
        judged[agent] = step_candidates(traj, first, agent, n_candidates)
        if len(judged[agent]) > 1:
            judgments += await judge_steps(ledger, traj, roles, agent, judged[agent], header)
    details: dict[str, Any] = {
        "panel": roles,
        "vote": rule,
        "delta": delta,
        "analyses": [a.record() for a in first],
        "judgments": [j.record() for j in judgments],
        "candidates_by_agent": judged,
        "heuristic": list(heuristic),
    }
    d = decide(details, rule, delta)
    if d.agent_basis == "heuristic":
        ledger.note_fallback("agent_panel", "heuristic")
    if d.step_basis == "agent_pass_proposal":
        # Nobody (or no clear majority) said "yes": trust the agent pass's ranking.
        ledger.note_fallback("step_panel", "agent_pass_proposal")
    own = [j for j in judgments if j.agent == d.agent]
    details |= {
        "agent_vote": {"winner": d.agent, "basis": d.agent_basis, **d.agent_vote.record()},
        "candidates": judged.get(d.agent, []),
        "step_vote": {"winner": d.step, "basis": d.step_basis, **(d.step_vote.record() if d.step_vote else {})},
        "agent_disagreement": disagreement(first, "agent"),
        "step_disagreement": disagreement(_per_analyst(own, d.agent), "step"),
        "discarded_steps": sum(a.discarded_steps for a in first),
        "summaries": [a.summary for a in first],
    }
    return finish(ledger, traj, d.agent, d.step, d.confidence, details)


@register_method("echo")
def echo(k: int = 3, candidates: int = 0, vote: str = "paper", delta: float = DELTA,
         compare_votes: bool = False) -> Method:
    """ECHO with a panel of ``k`` analysts judging every step of the elected agent (``candidates=N``: at most N):
    at most ``k * (1 + s)`` model calls per case, ``s`` the steps judged (twice the step pass with
    ``compare_votes`` when the rules elect different agents), re-sends counted. ``vote``: ``paper``
    (default) or ``weighted_share``; ``delta``: δ (see the module docstring)."""
    if k < 1:
        raise ValueError(f"echo: k must be >= 1, got {k}")
    if candidates < 0:
        raise ValueError(f"echo: candidates must be >= 0 (0: every step of the elected agent), got {candidates}")
    if vote not in VOTES:
        raise ValueError(f"echo: vote must be one of {', '.join(VOTES)}, got {vote!r}")
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"echo: delta must be in [0, 1], got {delta}")

    async def run(traj: Trajectory, ctx: MethodContext) -> Prediction:
        return await _echo(traj, ctx, k, candidates, vote, delta, compare_votes)

    run.settings = {"k": k, "candidates": candidates, "vote": vote, "delta": delta,  # type: ignore[attr-defined]
                    "compare_votes": compare_votes}
    return run

# ---- the scripted double's answers to this module's prompts (see attribution.llm.scripted_log) ----

@responder("attribution.echo.agent_panel")
def _scripted_echo_agents(ctx: ScriptedContext) -> str:
    step, agent = first_marked(ctx)
    conf = round(0.6 + 0.3 * ctx.rng.random(), 2)
    evals = [
        {"agent": a, "error_likelihood": 0.8 if a == agent else 0.1, "evidence": "marker" if a == agent else "none"}
        for a in agents_in(ctx)
    ]
    others = [a for a in agents_in(ctx) if a != agent]
    alts = [{"agents": [others[0]], "step": step + 1, "confidence": 0.2}] if others else []
    return json.dumps({
        "summary": "one step carries the marker",
        "agents": evals,
        "conclusion": {"type": "wrong result", "agents": [agent], "step": step, "confidence": conf},
        "alternatives": alts,
    })


@responder("attribution.echo.step_panel")
def _scripted_echo_steps(ctx: ScriptedContext) -> str:
    # One judgment per candidate step: "yes" when the candidate's own line carries the marker.
    step = int(ctx.metadata.get("attr_step", -1))
    hit = any(s == step for s, _ in marked(ctx))
    return json.dumps({
        "summary": "the marked step" if hit else "no marker here",
        "type": "wrong result" if hit else "none",
        "decisive_error": "yes" if hit else "no",
        "confidence": round(0.5 + 0.4 * ctx.rng.random(), 2),
    })
