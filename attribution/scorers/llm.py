"""LLM step scorers: a probability per step from the model, as the conformal paper's appendix C.3 asks for it.

- ``llm_naive`` (C.3, "Naive LLM Prompts"): one call per step (or per segment of consecutive steps when the
  trajectory has more than ``max_calls`` steps; every step of a segment gets the segment's probability). The
  prompt carries what the paper's naive prompt gives the model: the task of locating the most critical mistake
  within the segment, the problem, the correct answer (when the job may show it), the wrong final answer, the
  segment under review and the whole conversation it was cut from; the reply is one probability that the
  critical error lies in the segment, nothing else.
- ``llm_roles`` (C.1.2 and C.3, "Context Engineered Prompts"): first one call summarising why the team failed,
  from the whole trace; then, per step or segment, the paper's four fixed analyst roles (Conservative, Liberal,
  Skeptical, Pattern, each with the paper's two instructions in our words) each judge whether the segment holds
  the key error that led to the wrong answer, given the problem, the correct answer, the failure summary, the
  segment and the full conversation, in the paper's JSON schema (an investigation summary and a primary
  conclusion: agent, mistake step, confidence in [0, 1] read on the paper's scale, quoted evidence, reason,
  alternative explanations). The step score is the mean of the four confidences.

The prompts are written in the project's words. The log is rendered by
:func:`attribution.llm.prompt_fit.render_steps` (``[i] agent: text`` lines fitted to the context window; the
segment's steps weigh most). A reply with no readable probability (or confidence) counts as 0.5 (uninformative)
and is recorded in ``details["unusable"]``. NFE is the number of model calls (``llm_roles``: 1 + 4 per segment).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time

from attribution.llm.calls import new_ledger
from attribution.llm.prompt_fit import FitReport
from attribution.llm.prompting import ANSWER_CHARS, QUERY_CHARS, clip, messages, one_line, render_steps, step_views
from attribution.llm.replies import contract, many, schema_of, step_in, text, unit
from attribution.scorers.base import (
    Scorer,
    ScorerContext,
    StepScores,
    per_trajectory,
    register_scorer,
)
from attribution.sources.trajectory import Trajectory
from mas.llm.confidence import parse_confidence

SCORE_REPLY_TOKENS = 24
"""Completion budget per naive scoring call (tokens): the answer is one number."""
ROLE_REPLY_TOKENS = 400
"""Completion budget per role call (tokens): the paper's JSON with a short summary, evidence and reason."""
SUMMARY_REPLY_TOKENS = 200
"""Completion budget of the failure summary (tokens)."""
SUMMARY_CHARS = 800
"""Characters of the failure summary passed to the roles."""
MAX_CALLS = 40
"""Default calls per role per trajectory (beyond it, steps are scored in segments)."""
_PROB_RE = re.compile(r"(\d{1,3}(?:\.\d+)?)\s*%|(?<![\w.])(0?\.\d+|1\.0+|[01])(?!\d|\.\d)")

NAIVE_SYSTEM = "You find where in a conversation a team of AI agents went wrong."
ROLE_SYSTEM = "You are one analyst of a panel that finds the key error of a failed multi-agent conversation."
SUMMARY_SYSTEM = "You explain in a few sentences why a team of AI agents failed its task."

ROLES: dict[str, tuple[str, str]] = {
    "Conservative": ("Say a segment holds the error only when a contradiction or a logical mistake is plainly "
                     "visible in it.",
                     "Give a high confidence only when the evidence is direct and you quote it exactly."),
    "Liberal": ("Take causes further up or down the conversation into account, even indirect ones.",
                "Give a moderate confidence (0.5 to 0.7) to a cause that is plausible but not proven."),
    "Skeptical": ("Always name at least one other explanation and say what evidence is missing.",
                  "Lower your confidence when the evidence is incomplete."),
    "Pattern": ("Look for reasoning or coordination problems that repeat.",
                "Find patterns that span several steps rather than single slips."),
}
"""The four fixed analyst roles of the paper's context-engineered scorer (C.3) and their two instructions."""
CONFIDENCE_SCALE = ("0.0-0.2 very unlikely, 0.2-0.4 unlikely, 0.4-0.6 possible, 0.6-0.8 likely, "
                    "0.8-1.0 very likely")


def parse_probability(text: str) -> float | None:
    """The first probability in ``text`` (``0.7``, ``.7``, ``70%``), or None.

    >>> parse_probability("Probability: 0.85"), parse_probability("70 %"), parse_probability("step 3")
    (0.85, 0.7, None)
    """
    for m in _PROB_RE.finditer(text or ""):
        if m.group(1) is not None:
            value = float(m.group(1)) / 100.0
        else:
            value = float(m.group(2))
        if 0.0 <= value <= 1.0:
            return value
    return None


def segments(n_steps: int, max_calls: int) -> list[range]:
    """Consecutive step ranges, at most ``max_calls`` of them, covering ``0..n_steps-1``.

    >>> [list(r) for r in segments(5, 2)]
    [[0, 1, 2], [3, 4]]
    """
    size = max(1, math.ceil(n_steps / max(1, max_calls)))
    return [range(a, min(n_steps, a + size)) for a in range(0, n_steps, size)]


def role_contract(traj: Trajectory) -> type:
    """The paper's output schema (C.3) for one role's reply about one segment of ``traj``."""
    conclusion = contract("PrimaryConclusion", agent=text(80), mistake_step=step_in(0, traj.n_steps - 1),
                          confidence=unit(), evidence=many(text(200), 3), reason=text(240),
                          alternative_explanations=many(text(160), 2))
    return contract("RoleAnalysis", investigation_summary=text(240), primary_conclusion=conclusion)


def _problem(traj: Trajectory) -> str:
    return clip(one_line(traj.query), QUERY_CHARS)


def _answers(traj: Trajectory, with_ground_truth: bool, *, wrong: bool = True) -> str:
    lines = []
    if with_ground_truth and traj.ground_truth:
        lines.append(f"The correct answer to the problem: {clip(one_line(traj.ground_truth), ANSWER_CHARS)}")
    if wrong and traj.final_answer:
        lines.append(f"The wrong answer the conversation ended with: {clip(one_line(traj.final_answer), ANSWER_CHARS)}")
    return "".join(f"{line}\n" for line in lines)


def _label(seg: range) -> str:
    return f"step {seg.start}" if len(seg) == 1 else f"steps {seg.start} to {seg[-1]}"


def _segment_and_log(traj: Trajectory, seg: range, budget: int) -> tuple[str, str, FitReport]:
    """The segment's own lines (a third of ``budget`` at most) and the whole conversation fitted in the rest; the
    report of the whole conversation's fit, else of the segment's when only that was cut (its ``shown``: the
    segment's lines, then the whole's, as the prompt shows them)."""
    focus = set(seg)
    part, part_report = render_steps(step_views(traj, seg, focus=focus), max(32, budget // 3), focus=focus)
    whole, report = render_steps(step_views(traj, focus=focus), max(32, budget - len(part) // 4 - 8), focus=focus)
    fit = report if report.mode != "full" else part_report
    return part, whole, dataclasses.replace(fit, shown=part_report.shown + report.shown)


def naive_prompt(traj: Trajectory, with_ground_truth: bool, seg: range, part: str, whole: str) -> str:
    """C.3's naive prompt, in our words: locate the critical mistake; the probability that it lies in ``seg``."""
    return (
        "Several AI agents worked together on a user's query and failed to resolve it. Below is one segment of "
        "their conversation and the whole conversation it was cut from. Your task is to locate the most critical "
        "mistake, the one that made the team fail.\n"
        f"The problem: {_problem(traj)}\n"
        f"{_answers(traj, with_ground_truth)}"
        f"The segment under review ({_label(seg)}):\n{part}\n\n"
        f"The whole conversation:\n{whole}\n\n"
        "Reply with ONLY one number between 0 and 1: the probability that the critical error lies in the segment "
        "under review. No explanation, no other text."
    )


def summary_prompt(traj: Trajectory, with_ground_truth: bool, whole: str) -> str:
    """C.1.2's first call, in our words: why did the team fail, from the whole trace?"""
    return (
        "Several AI agents worked together on a problem and their final answer was wrong.\n"
        f"The problem: {_problem(traj)}\n"
        f"{_answers(traj, with_ground_truth)}"
        f"Their conversation:\n{whole}\n\n"
        "In at most four sentences, say why they failed: what went wrong, where, and how it led to the wrong answer."
    )


def role_prompt(traj: Trajectory, with_ground_truth: bool, role: str, summary: str, seg: range, part: str,
                whole: str) -> str:
    """C.3's role prompt, in our words: one analyst's JSON verdict on whether ``seg`` holds the key error."""
    first, second = ROLES[role]
    schema = json.dumps(schema_of(role_contract(traj)), ensure_ascii=False)
    return (
        f"The problem: {_problem(traj)}\n"
        f"{_answers(traj, with_ground_truth, wrong=False)}"
        f"Why the team failed (a summary of the whole conversation): {summary}\n\n"
        f"The segment under review ({_label(seg)}):\n{part}\n\n"
        f"The whole conversation:\n{whole}\n\n"
        f"YOUR ROLE: the {role} analyst.\n- {first}\n- {second}\n"
        "YOUR TASK: decide whether this segment is likely to hold the key reasoning error that led to the wrong "
        "final answer. Quote your evidence exactly from the text, and give a confidence between 0 and 1 that the "
        f"segment holds that error ({CONFIDENCE_SCALE}). Reply with ONLY valid JSON, no other text, following "
        f"this schema:\n{schema}"
    )


class SegmentScores:
    """One trajectory's step scores from the model, asked per segment on first need and cached.

    Awaiting ``scores(i)`` costs the scorer's calls for step ``i``'s segment the first time it is needed (one for
    ``llm_naive``; four for ``llm_roles``, after the one failure summary of the trajectory) and nothing after;
    early-stopped conformal sets (:func:`attribution.conformal.lazy_filtration_set`) therefore pay only for the
    steps their scan reaches.
    """

    def __init__(self, traj: Trajectory, ctx: ScorerContext, method: str, max_calls: int) -> None:
        self.traj, self.method, self.with_ground_truth = traj, method, ctx.with_ground_truth
        self.roles = list(ROLES) if method == "llm_roles" else []
        self.ledger = new_ledger(ctx, method)
        self.ledger.reply_tokens = SCORE_REPLY_TOKENS
        self.segs = segments(traj.n_steps, max_calls)
        self._seg_of = {i: k for k, seg in enumerate(self.segs) for i in seg}
        self._cache: dict[int, float] = {}
        self.summary: str | None = None
        self.unusable = 0

    async def __call__(self, step: int) -> float:
        k = self._seg_of[step]
        if k not in self._cache:
            self._cache[k] = await (self._roles(self.segs[k]) if self.roles else self._naive(self.segs[k]))
        return self._cache[k]

    async def _naive(self, seg: range) -> float:
        def build(budget: int):
            part, whole, report = _segment_and_log(self.traj, seg, budget - 200)
            return messages(NAIVE_SYSTEM, naive_prompt(self.traj, self.with_ground_truth, seg, part, whole)), report

        self.ledger.reply_tokens = SCORE_REPLY_TOKENS
        p = parse_probability(await self.ledger.ask("score", build, hints={"attr_steps": list(seg)}))
        if p is None:
            self.unusable += 1
            return 0.5
        return p

    async def _summarise(self) -> str:
        def build(budget: int):
            whole, report = render_steps(step_views(self.traj), budget - 150)
            return messages(SUMMARY_SYSTEM, summary_prompt(self.traj, self.with_ground_truth, whole)), report

        self.ledger.reply_tokens = SUMMARY_REPLY_TOKENS
        reply = await self.ledger.ask("summary", build)
        return clip(one_line(reply), SUMMARY_CHARS) or "(no summary)"

    async def _roles(self, seg: range) -> float:
        if self.summary is None:
            self.summary = await self._summarise()
        summary, schema = self.summary, schema_of(role_contract(self.traj))
        total = 0.0
        for role in self.roles:
            def build(budget: int, role: str = role):
                part, whole, report = _segment_and_log(self.traj, seg, budget - 500 - len(summary) // 4)
                return messages(ROLE_SYSTEM, role_prompt(self.traj, self.with_ground_truth, role, summary, seg, part,
                                                         whole)), report

            self.ledger.reply_tokens = ROLE_REPLY_TOKENS
            reply = await self.ledger.ask("score", build, schema=schema,
                                          hints={"attr_steps": list(seg), "attr_role": role})
            obj = self.ledger.parse("score", reply) or {}
            conclusion = obj.get("primary_conclusion")
            raw = conclusion.get("confidence") if isinstance(conclusion, dict) else obj.get("confidence")
            p = parse_confidence(raw, None)
            if p is None:
                self.unusable += 1
                p = 0.5
            total += p
        return min(1.0, max(0.0, total / len(self.roles)))

    @property
    def calls(self) -> int:
        """Model calls so far (the NFE)."""
        return self.ledger.calls


async def score_trajectory(lazy: SegmentScores) -> StepScores:
    """Every step's score from ``lazy`` (each segment asked once, by every role for ``llm_roles``)."""
    start = time.perf_counter()
    traj, ledger = lazy.traj, lazy.ledger
    scores = [await lazy(i) for i in range(traj.n_steps)]
    return StepScores(
        id=traj.id,
        n_steps=traj.n_steps,
        step_scores=scores,
        nfe=ledger.calls,
        tokens=ledger.tokens_in + ledger.tokens_out,
        seconds=time.perf_counter() - start,
        details={"segment_size": len(lazy.segs[0]) if lazy.segs else 0, "roles": lazy.roles,
                 **({"failure_summary": lazy.summary} if lazy.summary is not None else {}),
                 "unusable": lazy.unusable, "truncated": ledger.truncated, **ledger.accounting()},
    )


LAZY_SCORERS = ("llm_naive", "llm_roles")
"""Scorers that can score one step at a time (:class:`SegmentScores`)."""


def lazy_scores(name: str, traj: Trajectory, ctx: ScorerContext, *, max_calls: int = MAX_CALLS) -> SegmentScores | None:
    """The on-demand scorer of ``traj`` for the LLM scorer ``name``; None for scorers not in :data:`LAZY_SCORERS`."""
    if name not in LAZY_SCORERS:
        return None
    return SegmentScores(traj, ctx, name, max_calls)


@register_scorer("llm_naive")
def llm_naive(max_calls: int = MAX_CALLS) -> Scorer:
    """One call per step (segments when ``n_steps > max_calls``): C.3's naive prompt."""

    async def one(traj: Trajectory, ctx: ScorerContext) -> StepScores:
        return await score_trajectory(lazy_scores("llm_naive", traj, ctx, max_calls=max_calls))

    return per_trajectory(one)


@register_scorer("llm_roles")
def llm_roles(max_calls: int = MAX_CALLS) -> Scorer:
    """A failure summary, then the paper's four roles each scoring every step/segment (C.1.2, C.3); averaged."""

    async def one(traj: Trajectory, ctx: ScorerContext) -> StepScores:
        return await score_trajectory(lazy_scores("llm_roles", traj, ctx, max_calls=max_calls))

    return per_trajectory(one)
