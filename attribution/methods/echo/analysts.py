"""ECHO's objective analysts as its appendices write them: the paper variant of ``echo`` (ECHO A.1, A.5, A.7).

Decoupled analysis (A.1, ``DecoupledAgentAndStepAnalysis``): the same panel
of ``k`` analysts (roles sampled from the six of A.5, each with its focus
instruction) makes two passes over the same context, one call per analyst
and pass, so ``2 k`` calls per case:

- the agent pass (``attribution.echo.agent_analysis``) weighs which agent(s)
  caused the failure; the agent comes from its consensus (A.7, every agent of
  a multi-agent conclusion kept: ``details.attribution``);
- the step pass (``attribution.echo.step_analysis``) weighs the step of the
  mistake; the step comes from its consensus: the ``mistake_step`` of the
  winning conclusions (:mod:`attribution.methods.echo.consensus`).

Every analyst sees what A.5's ``analyze_conversation`` gives it (its
``_create_conversation_summary``): every step of the conversation with its
agent and content, then the hierarchical context of the first step as an
example of the levels (A.3's extraction, :mod:`attribution.methods.echo.extraction`), cut to
1,000 characters. A.5's code shows every step's full content; when the log
does not fit the route's window the steps are fitted like every prompt of
this project (:func:`attribution.llm.prompt_fit.render_steps`: texts cut
head and tail, far steps collapsed), and the example gets at most a quarter
of the budget.

The system prompt carries A.5's fields in this project's words: the analyst's
specialisation (:data:`FOCUS`), the four tasks (all agents, which agent(s),
which step, confidence and reasons), what the hierarchical context holds,
step numbering, the two conclusion types, and the JSON reply of A.5
(``analysis_summary``, ``agent_evaluations`` with error likelihood, reasoning
and evidence, ``primary_conclusion`` with type, attribution, mistake step,
confidence and reasoning, ``alternative_hypotheses``). The user prompt holds
the query, the correct answer (only with ground truth), the final answer and
the context. Reply fields are bounded to fit the route's reply budget
(:func:`reply_sizes`); reasons come before the fields they explain.

Temperatures: 0.3-0.9, one per role (:data:`attribution.methods.echo.ROLES`),
as the paper's setup varies them across the sampled analysts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from attribution.llm.calls import CaseLedger
from attribution.llm.prompt_fit import clip, render_steps, step_views
from attribution.llm.prompting import agent_names, estimate_tokens, messages, resolve_actor, resolve_step
from attribution.llm.replies import contract, many, one_of, schema_of, step_in, text, unit
from attribution.methods.echo.consensus import CONCLUSION_TYPES
from attribution.methods.echo.extraction import format_context, hierarchical_context
from attribution.methods.echo.vote import Analysis, Conclusion
from attribution.sources.trajectory import Trajectory
from mas.llm.confidence import parse_confidence

FOCUS: dict[str, str] = {
    "conservative": "You hold a high bar of proof. Attribute an error only on strong, clear evidence, prefer one "
                    "responsible agent to several, and without definitive proof keep your confidence low.",
    "liberal": "You attribute on reasonable evidence. Consider that several agents may share the mistake, look for "
               "subtle errors others would overlook, and name a culprit even at moderate confidence.",
    "detail-focused": "You work from specific evidence: exact wording, numbers and facts. Look for small "
                      "inconsistencies, gaps in logic and factual slips; concrete evidence outweighs general patterns.",
    "pattern-focused": "You look at the shape of the reasoning: recurring themes, breaks in the logical flow, "
                       "systemic problems and how an error travels through the conversation.",
    "skeptical": "You question every assumption. Look for other explanations, ask whether an apparent error may be "
                 "valid reasoning and whether the reference answer itself could be wrong, and challenge the obvious "
                 "attribution.",
    "general": "You keep a balanced view with no specialisation, weigh every kind of evidence equally, and look for "
               "the most obvious and most consequential mistakes.",
}
"""A.5's six analyst focuses (``_get_focus_instructions``), in this project's words."""
PASSES = {
    "agent": "In this pass your main question is WHO: which agent or agents caused the failure.",
    "step": "In this pass your main question is WHEN: at which step the decisive mistake was made.",
}
"""What each decoupled pass weighs (A.1: ``Eval(t, C, ρ, γ)`` for t in agent, step)."""
EXAMPLE_CHARS = 1000
"""A.5 shows the first step's hierarchical context cut to this many characters."""
FIXED_TOKENS = 200
"""Tokens of the user prompt's fixed text besides the header and the context (headings, the closing request)."""


def reply_sizes(reply_tokens: int) -> dict[str, int]:
    """Bounds of the reply fields for a reply budget (tokens): evaluations listed, alternatives, and characters per
    reason, so that a whole A.5 reply fits (about 4 characters a token, plus the keys).

    >>> reply_sizes(512)["evaluations"], reply_sizes(256)["evaluations"], reply_sizes(1024)["evaluations"]
    (3, 2, 6)
    """
    if reply_tokens >= 900:
        return {"evaluations": 6, "alternatives": 2, "summary": 200, "reason": 120, "conclusion": 200}
    if reply_tokens >= 400:
        return {"evaluations": 3, "alternatives": 1, "summary": 120, "reason": 60, "conclusion": 120}
    return {"evaluations": 2, "alternatives": 1, "summary": 80, "reason": 40, "conclusion": 80}


def analysis_contract(traj: Trajectory, reply_tokens: int) -> Any:
    """The A.5 reply: summary, agent evaluations, primary conclusion, alternative hypotheses."""
    names, last, size = agent_names(traj), max(0, traj.n_steps - 1), reply_sizes(reply_tokens)
    evaluation = contract("AgentEvaluation", agent_name=one_of(names), step_index=step_in(0, last),
                          reasoning=text(size["reason"]), evidence=text(size["reason"]), error_likelihood=unit())
    conclusion = contract("PrimaryConclusion", reasoning=text(size["conclusion"]), type=one_of(list(CONCLUSION_TYPES)),
                          attribution=many(one_of(names), min(3, len(names))), mistake_step=step_in(0, last),
                          confidence=unit())
    alternative = contract("AlternativeHypothesis", reasoning=text(size["reason"]), type=text(20),
                           attribution=many(one_of(names), min(2, len(names))), mistake_step=step_in(0, last),
                           confidence=unit())
    return contract("ObjectiveAnalysis", analysis_summary=text(size["summary"]),
                    agent_evaluations=many(evaluation, min(len(names), size["evaluations"]), 1),
                    primary_conclusion=conclusion, alternative_hypotheses=many(alternative, size["alternatives"]))


def _answer() -> str:
    return (
        "Reply with JSON only, in this form:\n"
        '{"analysis_summary": "<how you investigated and what you found>", '
        '"agent_evaluations": [{"agent_name": "<agent>", "step_index": <step>, "reasoning": "<why this agent may or may '
        'not have caused the error>", "evidence": "<specific evidence>", "error_likelihood": <0-1>}], '
        '"primary_conclusion": {"reasoning": "<your conclusion, including the step of the error>", '
        '"type": "single_agent" or "multi_agent", "attribution": ["<agent>"], "mistake_step": <step>, '
        '"confidence": <0-1>}, '
        '"alternative_hypotheses": [{"reasoning": "<another explanation>", "type": "<conclusion type>", '
        '"attribution": ["<agent>"], "mistake_step": <step>, "confidence": <0-1>}]}'
    )


def system_prompt(role: str) -> str:
    """A.5's system prompt in this project's words, with the analyst's focus."""
    return (
        "You are an objective analyst running an impartial investigation of a multi-agent conversation that ended "
        "in a wrong final answer, to find which agent's mistake caused it.\n"
        f"Your specialisation: {FOCUS[role]}\n"
        "Your task:\n"
        "1. Examine ALL agents of the conversation, not one in particular.\n"
        "2. Decide which agent or agents most likely caused the wrong final answer.\n"
        "3. Decide at which step of the conversation the mistake was made.\n"
        "4. Give a confidence and your reasons for each conclusion.\n"
        "The conversation comes with hierarchical context: steps next to a step in full detail, steps two or three "
        "away as key decisions, steps further away as brief summaries and milestones.\n"
        "Steps are numbered in order, [0], [1], and so on; a step number is the index shown, and each step is one "
        "agent's turn.\n"
        "Possible conclusions: single_agent (one agent made the mistake, at one step) or multi_agent (several agents "
        "contributed to it, at specific steps).\n"
        "Be thorough and objective, and consider every possibility, including that no single agent is clearly at "
        "fault. Pay particular attention to the exact step where the error was made.\n" + _answer()
    )


def conversation_context(traj: Trajectory, budget: int) -> tuple[str, Any]:
    """A.5's conversation summary within ``budget`` tokens: every step, then step 0's hierarchical context."""
    if traj.n_steps == 0:
        return "(no steps)", None
    example = format_context(hierarchical_context(traj, 0), min(EXAMPLE_CHARS, max(200, budget)))
    log, report = render_steps(step_views(traj), max(16, budget - estimate_tokens(example)))
    return (f"Conversation ({traj.n_steps} steps; [step] agent: content):\n{log}\n\n"
            f"Hierarchical context of the first step, as an example of the levels:\n{example}"), report


async def analysis_pass(ledger: CaseLedger, traj: Trajectory, roles: list[str], temperatures: dict[str, float],
                        which: str, header: str) -> list[Analysis]:
    """One decoupled pass (``which``: agent or step): every analyst once, concurrently, at its role's temperature."""
    schema = schema_of(analysis_contract(traj, ledger.reply_tokens))
    request = ("Conduct an objective analysis of this conversation to determine the error attribution: which "
               "agent(s) caused the error that led to the wrong final answer, and at which step. " + PASSES[which])

    async def one(role: str) -> Analysis:
        system = system_prompt(role)

        def build(budget: int):
            context, report = conversation_context(traj, budget - estimate_tokens(system + header) - FIXED_TOKENS)
            return messages(system, f"{header}\n\n{context}\n\n{request}"), report

        hints = {"attr_role": role, "attr_pass": which}
        reply = await ledger.ask(f"{which}_analysis", build, temperature=temperatures[role], hints=hints, schema=schema)
        obj = ledger.parse(f"{which}_analysis", reply)
        analysis = parse_paper_analysis(traj, role, obj)
        if obj is None:
            analysis.raw = clip(reply, 600)
        return analysis

    return list(await asyncio.gather(*(one(r) for r in roles)))


def _agents(traj: Trajectory, value: Any) -> list[str]:
    names = value if isinstance(value, list) else [] if value is None else [value]
    return list(dict.fromkeys(a for a in (resolve_actor(traj, n) for n in names) if a))


def _conclusion(traj: Trajectory, raw: Any, analysis: Analysis) -> Conclusion | None:
    if not isinstance(raw, dict):
        return None
    step = resolve_step(traj, raw.get("mistake_step"))
    if step is None and raw.get("mistake_step") not in (None, "", "null"):
        analysis.discarded_steps += 1  # A.7 validates a step against the log's bounds
    kind = raw.get("type")
    return Conclusion(agents=_agents(traj, raw.get("attribution")), step=step,
                      confidence=parse_confidence(raw.get("confidence"), 0.0),  # A.7: a missing confidence is 0
                      type=str(kind)[:40] if isinstance(kind, str) else "")


def parse_paper_analysis(traj: Trajectory, role: str, obj: dict[str, Any] | None) -> Analysis:
    """An :class:`Analysis` from an A.5 reply; agents not in the log and steps outside it are dropped. An
    unreadable reply has no conclusion (A.5 gives it confidence 0, which A.7 drops)."""
    a = Analysis(role=role, raw=obj)
    if not obj:
        return a
    a.summary = str(obj.get("analysis_summary", ""))[:300]
    evals = obj.get("agent_evaluations")
    for ev in evals if isinstance(evals, list) else []:
        if isinstance(ev, dict) and (name := resolve_actor(traj, ev.get("agent_name"))):
            a.evaluations[name] = max(a.evaluations.get(name, 0.0), parse_confidence(ev.get("error_likelihood"), 0.0))
            a.evidence[name] = str(ev.get("evidence", ""))[:200]
    a.conclusion = _conclusion(traj, obj.get("primary_conclusion"), a)
    alts = obj.get("alternative_hypotheses")
    for alt in alts if isinstance(alts, list) else []:
        if (c := _conclusion(traj, alt, a)) is not None:
            a.alternatives.append(c)
    return a
