"""ECHO: hierarchical context, a panel of objective analysts, confidence-weighted consensus.

Two variants (``variant``):

``paper`` (the default): ECHO as its appendices write it (ECHO A.1, A.3, A.5,
A.7; :mod:`attribution.methods.echo.analysts`). A panel of ``k`` analysts (default 3, roles
sampled with the seed from A.5's six) makes two decoupled passes over the
same context, one call per analyst and pass: ``2 k`` calls per case. The
context is A.5's conversation summary (every step, then the first step's
hierarchical context with A.3's extraction as an example). The agent comes
from the agent pass's A.7 consensus (every agent of a multi-agent conclusion
recorded in ``details.attribution``, the first predicted), the step from the
step pass's: the winning conclusions' ``mistake_step``. Without consensus
there is no prediction (``fallback=heuristic``: the project's fallbacks).

``project``: this project's own pipeline, kept by name so that the two can
be compared on the same records:

1. agent pass (k calls, one per analyst): the analysts see the whole log
   when it fits the route's window, otherwise the hierarchical view
   (:mod:`attribution.methods.echo.context`) centred on error hotspots. Each returns JSON:
   summary, per-agent evaluations (error likelihood, evidence), a primary
   conclusion (type in words, agents, step, confidence) and alternative
   hypotheses. Votes elect the responsible agent.
2. step pass (k calls per candidate): every step of the elected agent is
   judged (``candidates=0``, the default; ``candidates=N`` keeps the first N
   by priority: the ones the agent pass proposed, then steps at or just
   before an error cue, then the earliest). Every analyst judges every
   candidate separately, each time seeing the hierarchical context centred
   on *that* step: L1 (±1) full content, L2 (±2-3), L3 (±4-6), L4 (the rest)
   (:mod:`attribution.methods.echo.context`; ``context=paper`` extracts L2-L4 as A.3 does). A
   judgment says whether the step is the decisive error, with a confidence;
   "yes" judgments vote for their step. An agent with a single step skips
   this pass.

   Model calls per case: at most ``k * (1 + s)``, ``s`` the elected agent's
   steps (or ``candidates`` when set), ``k`` when the agent has one step.

   Voting (:mod:`attribution.methods.echo.vote`): ``vote="paper"`` (the default): δ = 0.3 is a
   minimum confidence, the kept ballots vote on the conclusion type (read
   from the number of agents a ballot names) and only the winning type's
   ballots elect one agent (and, in the step pass, the step).
   ``vote="weighted_share"``: every ballot counts, alternatives at half
   weight, and δ applies to the winner's share. A panel without consensus
   falls back: the agent to the highest mean error likelihood, the step to
   the agent pass's first proposal. With ``compare_votes=True`` the step pass
   also judges the agent the other rule elects (real calls, counted).

In both, a re-sent prompt (too long, a transient failure) is counted again,
every prompt is fitted to the route's context window
(:func:`attribution.llm.prompting.render_steps`), steps outside the
trajectory are discarded before voting, and every analyst's parsed output is
recorded (``details.analyses``; the paper variant's step pass in
``details.step_analyses``, the project variant's judgments in
``details.judgments``), so :func:`attribution.methods.echo.consensus.decide` replays the answer from
the record (``scripts/echo_votes.py``).
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from attribution.llm.prompt_fit import clip
from attribution.llm.calls import CaseLedger, new_ledger
from attribution.methods.echo.analysts import analysis_pass
from attribution.methods.echo.consensus import FALLBACKS, decide_paper
from attribution.methods.echo.context import EXTRACTIONS, hierarchical_views, hotspots, step_types
from attribution.methods.echo.vote import (
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
from mas.llm.confidence import parse_confidence

MAX_CANDIDATES = 3
"""``step_candidates``' default limit (the project variant's earlier step-pass limit, ``candidates=3``)."""
VARIANTS = ("paper", "project")
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
"""Analyst role -> (temperature, the project variant's instruction); the paper variant instructs each role as A.5
does (:data:`attribution.methods.echo.analysts.FOCUS`)."""


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
        hints = {"attr_role": role, "attr_focus": sorted(focus)}
        reply = await ledger.ask(stage, lambda budget: user_for(role, budget), temperature=ROLES[role][0], hints=hints,
                                  schema=schema)
        obj = ledger.parse(stage, reply)
        a = parse_analysis(traj, role, obj)
        if obj is None:
            a.raw = clip(reply, RAW_CHARS)
        return a

    return list(await asyncio.gather(*(one(r) for r in roles)))


def _agent_view(traj: Trajectory, hot: set[int], budget: int, extraction: str = "project"):
    """Agent pass: the whole log when it fits (agents are judged on all they did), else L1-L4 around ``hot``."""
    text, report = render_steps(step_views(traj), budget)
    if report.mode == "full":
        return text, report
    return render_steps(hierarchical_views(traj, hot, extraction), budget, focus=hot)


def step_view(traj: Trajectory, step: int, budget: int, extraction: str = "project"):
    """Step pass: the hierarchical context centred on ``step`` (L1 ±1 … L4 milestones), fitted to ``budget``."""
    return render_steps(hierarchical_views(traj, {step}, extraction), budget, focus={step})


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
    extraction: str = "project",
) -> list[Judgment]:
    """Every analyst judges every candidate, each with the hierarchical view centred on that candidate."""
    note = "Only step {0} and its neighbours are shown in full; (key ...)/(summary)/(milestone ...) lines are shortened."

    async def one(role: str, step: int) -> Judgment:
        who = display_agent(traj.steps[step].agent)

        def build(budget: int):
            text, report = step_view(traj, step, budget - 250, extraction)
            user = (f"{header}\n{note.format(step)}\nThe responsible agent is {agent}.\n\nLog:\n{text}\n\n"
                    + STEP_ASK.format(step=step, agent=who))
            return messages(_system(role), user), report

        hints = {"attr_role": role, "attr_step": step, "attr_candidates": candidates}
        reply = await ledger.ask("step_panel", build, temperature=ROLES[role][0], hints=hints, schema=step_schema())
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
                compare_votes: bool, extraction: str = "project") -> Prediction:
    ledger = new_ledger(ctx, "echo")
    roles = sample_panel(k, ctx.seed)
    header = case_header(traj, ctx.with_ground_truth)
    note = "Lines marked (key ...)/(summary)/(milestone ...) are shortened; missing step numbers were left out."

    hot = hotspots(traj)

    def agent_prompt(role: str, budget: int):
        text, report = _agent_view(traj, hot, budget - 350, extraction)
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
            judgments += await judge_steps(ledger, traj, roles, agent, judged[agent], header, extraction)
    details: dict[str, Any] = {
        "variant": "project",
        "context": extraction,
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


async def _echo_paper(traj: Trajectory, ctx: MethodContext, k: int, rule: str, delta: float,
                      fallback: str) -> Prediction:
    """The paper variant (ECHO A.1, A.5, A.7; see the module docstring)."""
    ledger = new_ledger(ctx, "echo")
    roles = sample_panel(k, ctx.seed)
    header = case_header(traj, ctx.with_ground_truth)
    temperatures = {r: ROLES[r][0] for r in roles}
    agent_pass = await analysis_pass(ledger, traj, roles, temperatures, "agent", header)
    step_pass = await analysis_pass(ledger, traj, roles, temperatures, "step", header)
    details: dict[str, Any] = {
        "variant": "paper", "panel": roles, "vote": rule, "delta": delta, "fallback": fallback,
        "analyses": [a.record() for a in agent_pass], "step_analyses": [a.record() for a in step_pass],
        "heuristic": list(heuristic_guess(traj)),
    }
    d = decide_paper(details, rule, delta)
    for stage, basis in (("agent_analysis", d.agent_basis), ("step_analysis", d.step_basis)):
        if basis != "consensus":
            ledger.note_fallback(stage, "no_prediction" if basis == "none" else basis)
    speaker = display_agent(traj.steps[actor_step(traj, d.step)].agent) if d.step is not None else None
    details |= {
        "attribution": d.agents,
        "agent_vote": {"winner": d.agent, "basis": d.agent_basis,
                       **(d.agent_consensus.record() if d.agent_consensus else {})},
        "step_vote": {"winner": d.step, "basis": d.step_basis,
                      **(d.step_consensus.record() if d.step_consensus else {})},
        "disagreement": {
            "agent": d.agent_consensus.disagreement if d.agent_consensus else {},
            "step": d.step_consensus.disagreement if d.step_consensus else {},
            # ECHO section 3.3, item (3): do the agent and the step levels agree?
            "agent_step_consistent": None if speaker is None or not d.agents else speaker in d.agents,
        },
        "discarded_steps": sum(a.discarded_steps for a in agent_pass + step_pass),
    }
    return finish(ledger, traj, d.agent, d.step, d.confidence, details, infer_agent=False)


@register_method("echo")
def echo(k: int = 3, variant: str = "paper", vote: str = "paper", delta: float = DELTA, candidates: int = 0,
         compare_votes: bool = False, context: str | None = None, fallback: str = "none") -> Method:
    """ECHO (see the module docstring). ``variant``: ``paper`` (default; ``2 k`` model calls per case) or
    ``project`` (at most ``k * (1 + s)`` calls, ``s`` the steps judged, twice the step pass with
    ``compare_votes`` when the rules elect different agents); re-sends counted. ``vote``: ``paper`` (default)
    or ``weighted_share``; ``delta``: δ. Project variant only: ``candidates``, ``compare_votes``, ``context``
    (``project``, its default, or ``paper``: A.3's extraction in its hierarchical views). Paper variant only:
    ``fallback`` (``none``, its default: no consensus, no prediction; ``heuristic``)."""
    if k < 1:
        raise ValueError(f"echo: k must be >= 1, got {k}")
    if variant not in VARIANTS:
        raise ValueError(f"echo: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if candidates < 0:
        raise ValueError(f"echo: candidates must be >= 0 (0: every step of the elected agent), got {candidates}")
    if vote not in VOTES:
        raise ValueError(f"echo: vote must be one of {', '.join(VOTES)}, got {vote!r}")
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"echo: delta must be in [0, 1], got {delta}")
    if fallback not in FALLBACKS:
        raise ValueError(f"echo: fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
    if context is not None and context not in EXTRACTIONS:
        raise ValueError(f"echo: context must be one of {', '.join(EXTRACTIONS)}, got {context!r}")
    if variant == "paper" and (candidates or compare_votes or context is not None):
        raise ValueError("echo: candidates, compare_votes and context are options of variant=project (the paper "
                         "variant has no per-step judgments; its context is A.5's)")
    if variant == "project" and fallback != "none":
        raise ValueError("echo: fallback is an option of variant=paper (the project variant always falls back)")

    if variant == "paper":
        async def run(traj: Trajectory, ctx: MethodContext) -> Prediction:
            return await _echo_paper(traj, ctx, k, vote, delta, fallback)

        run.settings = {"k": k, "variant": variant, "vote": vote, "delta": delta,  # type: ignore[attr-defined]
                        "fallback": fallback}
        return run
    extraction = context or "project"

    async def run_project(traj: Trajectory, ctx: MethodContext) -> Prediction:
        return await _echo(traj, ctx, k, candidates, vote, delta, compare_votes, extraction)

    run_project.settings = {"k": k, "variant": variant, "candidates": candidates,  # type: ignore[attr-defined]
                            "vote": vote, "delta": delta, "compare_votes": compare_votes, "context": extraction}
    return run_project
