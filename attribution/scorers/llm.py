"""LLM step scorers: a probability per step from the model.

- ``llm_naive``: one call per step (or per segment of consecutive steps when
  the trajectory has more than ``max_calls`` steps; every step of a segment
  gets the segment's probability), the probability as the only output.
- ``llm_roles``: the same per-step/segment question asked by ``k`` ECHO
  analyst roles (role instruction and temperature), averaged per step.

A reply with no readable probability counts as 0.5 (uninformative) and is
recorded in ``details["unusable"]``. NFE is the number of model calls.
"""

from __future__ import annotations

import math
import re
import time

from attribution.llm.scripted_log import marked
from attribution.methods.echo import ROLES, sample_panel
from attribution.llm.calls import CaseLedger, new_ledger
from attribution.llm.prompting import case_header, messages, render_steps, step_views
from attribution.scorers.base import (
    Scorer,
    ScorerContext,
    StepScores,
    per_trajectory,
    register_scorer,
)
from attribution.sources.trajectory import Trajectory
from mas.llm.scripting import ScriptedContext, responder

SCORE_REPLY_TOKENS = 24
"""Completion budget per scoring call (tokens): the answer is one number."""
MAX_CALLS, ROLES_K = 40, 3
"""Default calls per role per trajectory (beyond it, steps are scored in segments) and llm_roles' panel size."""
_PROB_RE = re.compile(r"(\d{1,3}(?:\.\d+)?)\s*%|(?<![\w.])(0?\.\d+|1\.0+|[01])(?!\d|\.\d)")

BASE_SYSTEM = (
    "You review the log of a multi-agent team that failed its task. The decisive error is the earliest step "
    "whose mistake caused the failure. Reply with only a probability between 0 and 1."
)


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


async def _score_segment(ledger: CaseLedger, traj: Trajectory, header: str, seg: range, system: str,
                         temperature: float | None) -> float | None:
    label = f"step {seg.start}" if len(seg) == 1 else f"one of steps {seg.start}-{seg[-1]}"
    ask = f"Probability that the decisive error is {label}? Reply with only a number between 0 and 1."
    focus = set(seg)

    def build(budget: int):
        views = step_views(traj, range(seg[-1] + 1), focus=focus)
        text, report = render_steps(views, budget - 150, focus=focus)
        return messages(system, f"{header}\n\nLog up to the step(s) under review:\n{text}\n\n{ask}"), report

    reply = await ledger.ask("score", build, temperature=temperature, meta={"attr_steps": list(seg)})
    return parse_probability(reply)


class SegmentScores:
    """One trajectory's step scores from the model, asked per segment on first need and cached.

    Awaiting ``scores(i)`` costs ``len(roles)`` calls the first time step
    ``i``'s segment is needed and nothing after; early-stopped conformal
    sets (:func:`attribution.conformal.lazy_filtration_set`) therefore pay
    only for the steps their scan reaches.
    """

    def __init__(self, traj: Trajectory, ctx: ScorerContext, method: str, roles: list[str | None],
                 max_calls: int) -> None:
        self.traj, self.roles = traj, roles
        self.ledger = new_ledger(ctx, method)
        self.ledger.reply_tokens = SCORE_REPLY_TOKENS
        self.header = case_header(traj, ctx.with_ground_truth)
        self.segs = segments(traj.n_steps, max_calls)
        self._seg_of = {i: k for k, seg in enumerate(self.segs) for i in seg}
        self._cache: dict[int, float] = {}
        self.unusable = 0

    async def __call__(self, step: int) -> float:
        k = self._seg_of[step]
        if k not in self._cache:
            self._cache[k] = await self._ask(self.segs[k])
        return self._cache[k]

    async def _ask(self, seg: range) -> float:
        total = 0.0
        for role in self.roles:
            system = BASE_SYSTEM if role is None else f"You are a {role} analyst. {ROLES[role][1]} {BASE_SYSTEM}"
            temperature = None if role is None else ROLES[role][0]
            p = await _score_segment(self.ledger, self.traj, self.header, seg, system, temperature)
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
    """Every step's score from ``lazy`` (each segment asked once per role, averaged over the roles)."""
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
        details={"segment_size": len(lazy.segs[0]) if lazy.segs else 0, "roles": [r for r in lazy.roles if r],
                 "unusable": lazy.unusable, "truncated": ledger.truncated, **ledger.accounting()},
    )


LAZY_SCORERS = ("llm_naive", "llm_roles")
"""Scorers that can score one step at a time (:class:`SegmentScores`)."""


def lazy_scores(name: str, traj: Trajectory, ctx: ScorerContext, *, k: int = ROLES_K,
                max_calls: int = MAX_CALLS) -> SegmentScores | None:
    """The on-demand scorer of ``traj`` for the LLM scorer ``name``; None for scorers not in :data:`LAZY_SCORERS`.

    ``llm_naive`` asks the plain prompt; ``llm_roles`` asks ``k`` ECHO roles sampled with the seed.
    """
    if name not in LAZY_SCORERS:
        return None
    roles: list[str | None] = [None] if name == "llm_naive" else list(sample_panel(k, ctx.seed))
    return SegmentScores(traj, ctx, name, roles, max_calls)


@register_scorer("llm_naive")
def llm_naive(max_calls: int = MAX_CALLS) -> Scorer:
    """One call per step (segments when ``n_steps > max_calls``)."""

    async def one(traj: Trajectory, ctx: ScorerContext) -> StepScores:
        return await score_trajectory(lazy_scores("llm_naive", traj, ctx, max_calls=max_calls))

    return per_trajectory(one)


@register_scorer("llm_roles")
def llm_roles(k: int = ROLES_K, max_calls: int = MAX_CALLS) -> Scorer:
    """``k`` ECHO roles (sampled with the seed) each scoring every step/segment; averaged."""

    async def one(traj: Trajectory, ctx: ScorerContext) -> StepScores:
        return await score_trajectory(lazy_scores("llm_roles", traj, ctx, k=k, max_calls=max_calls))

    return per_trajectory(one)

# ---- the scripted double's answers to this module's prompts (see attribution.llm.scripted_log) ----

def _scripted_score(ctx: ScriptedContext, noise: float) -> str:
    steps = set(ctx.metadata.get("attr_steps", []))
    hit = any(s in steps for s, _ in marked(ctx))
    p = (0.85 if hit else 0.1) + noise * (ctx.rng.random() - 0.5)
    return f"{min(1.0, max(0.0, p)):.2f}"


@responder("attribution.llm_naive.score")
def _scripted_naive_score(ctx: ScriptedContext) -> str:
    return _scripted_score(ctx, 0.0)


@responder("attribution.llm_roles.score")
def _scripted_roles_score(ctx: ScriptedContext) -> str:
    return "Probability: " + _scripted_score(ctx, 0.1)
