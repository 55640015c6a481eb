"""Fitting a trajectory's steps into a prompt budget (see :mod:`attribution.llm.prompting`).

Steps render as ``[i] agent: text`` lines. Over budget, texts are cut to a
common per-step cap (head and tail kept, weighted steps get more); below a
minimum cap, steps far from the focus collapse into ``… steps a–b omitted …``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from attribution.sources.trajectory import Trajectory
from mas.llm.tokens import CHARS_PER_TOKEN

MIN_STEP_CHARS = 48
"""Below this per-step cap a step says nothing; windowing takes over instead."""


def clip(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` keeping head and tail, the cut marked.

    >>> clip("a" * 10 + "b" * 10, 12)
    'aaaa…[8]…bbbb'
    """
    text = text or ""
    if len(text) <= max_chars:
        return text
    if max_chars < 12:
        return text[: max(0, max_chars - 1)] + "…"
    cut = len(text) - max_chars + 4
    marker = f"…[{cut}]…"
    keep = max(0, max_chars - len(marker))
    head = (keep * 2 + 2) // 3
    return text[:head] + marker + text[len(text) - (keep - head) :] if keep > head else text[:head] + marker


def one_line(text: object) -> str:
    """``text`` on one line, its whitespace runs as single spaces: a field of a log file (an answer, a speaker's
    name) that held a newline could otherwise write a line of its own into the prompt, such as a fake step
    ``[4] DataVerification_Expert: ERROR``.

    >>> one_line("8\\n[4] X: ERROR")
    '8 [4] X: ERROR'
    """
    return " ".join(str(text).split())

@dataclass(kw_only=True, slots=True)
class StepView:
    """One step as a prompt shows it (its text may already be a summary)."""

    index: int
    agent: str
    text: str
    weight: float = 1.0
    """Relative share of the budget when texts must be cut (focus steps > 1)."""


@dataclass(kw_only=True, slots=True)
class FitReport:
    """How one prompt's step list was fitted to its budget."""

    mode: str
    """``full``, ``compressed`` (texts cut) or ``windowed`` (steps omitted)."""
    n_steps: int
    shown_steps: int
    cap_chars: int | None
    budget_tokens: int
    prompt_tokens: int = 0
    shown: list[tuple[int, str, str]] = field(default_factory=list)
    """Each shown step as the prompt shows it: (index, agent, text as cut), in prompt order. It travels with the
    call as its ``attr_log`` hint (:meth:`attribution.llm.calls.CaseLedger.ask`), not in :meth:`as_dict`."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "n_steps": self.n_steps,
            "shown_steps": self.shown_steps,
            "cap_chars": self.cap_chars,
            "budget_tokens": self.budget_tokens,
            "prompt_tokens": self.prompt_tokens,
        }


def _shown(v: StepView, cap: int | None) -> tuple[int, str, str]:
    """(index, agent, text) of ``v`` with its text cut to ``cap`` (weighted; None: whole)."""
    body = v.text
    if cap is not None:
        body = clip(body, max(MIN_STEP_CHARS // 2, int(cap * v.weight)))
    return v.index, v.agent, body


def _line(v: StepView, cap: int | None) -> str:
    index, agent, body = _shown(v, cap)
    return f"[{index}] {agent}: {body}"


def _cap_for(views: Sequence[StepView], budget_chars: int) -> int | None:
    """Largest per-step cap whose rendering fits ``budget_chars``; None if MIN_STEP_CHARS does not."""
    lo, hi = MIN_STEP_CHARS, max(MIN_STEP_CHARS, max(len(v.text) for v in views))
    if sum(len(_line(v, lo)) + 1 for v in views) > budget_chars:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(len(_line(v, mid)) + 1 for v in views) <= budget_chars:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _window(views: Sequence[StepView], budget_chars: int, focus: set[int]) -> tuple[list[str], list[StepView]]:
    """Keep steps by priority (focus, near focus, first, last) at the minimum cap; collapse the rest."""
    anchors = sorted(focus) or [views[0].index, views[-1].index]

    def priority(v: StepView) -> tuple[float, int]:
        dist = min(abs(v.index - a) for a in anchors)
        edge = 0 if v.index in (views[0].index, views[-1].index) else 1
        return (dist if dist <= 1 else dist + edge * 0.5, v.index)

    kept: set[int] = set()
    used = 0
    for v in sorted(views, key=priority):
        cost = len(_line(v, MIN_STEP_CHARS)) + 1 + 40  # 40: room for an omission marker
        if used + cost > budget_chars:
            break
        kept.add(v.index)
        used += cost
    lines: list[str] = []
    gap: list[int] = []
    for v in views:
        if v.index in kept:
            if gap:
                lines.append(f"… steps {gap[0]}–{gap[-1]} omitted …")
                gap = []
            lines.append(_line(v, MIN_STEP_CHARS))
        else:
            gap.append(v.index)
    if gap:
        lines.append(f"… steps {gap[0]}–{gap[-1]} omitted …")
    return lines, [v for v in views if v.index in kept]


def render_steps(views: Sequence[StepView], budget_tokens: int, focus: set[int] | None = None) -> tuple[str, FitReport]:
    """Render ``views`` within ``budget_tokens``; the report says how.

    >>> text, rep = render_steps([StepView(index=0, agent="a", text="hi")], 100)
    >>> text, rep.mode
    ('[0] a: hi', 'full')
    """
    if not views:
        return "(no steps)", FitReport(mode="full", n_steps=0, shown_steps=0, cap_chars=None, budget_tokens=budget_tokens)
    budget_chars = max(0, budget_tokens) * CHARS_PER_TOKEN
    # Whitespace runs carry no meaning for the model; collapse them once. The speaker's name goes on one line too:
    # a name holding a newline wrote a fake step line of its own.
    views = [StepView(index=v.index, agent=one_line(v.agent or ""), text=one_line(v.text or ""), weight=v.weight)
             for v in views]
    n = len(views)
    full = "\n".join(_line(v, None) for v in views)
    if len(full) <= budget_chars:
        return full, FitReport(mode="full", n_steps=n, shown_steps=n, cap_chars=None, budget_tokens=budget_tokens,
                               shown=[_shown(v, None) for v in views])
    cap = _cap_for(views, budget_chars)
    if cap is not None:
        text = "\n".join(_line(v, cap) for v in views)
        return text, FitReport(mode="compressed", n_steps=n, shown_steps=n, cap_chars=cap, budget_tokens=budget_tokens,
                               shown=[_shown(v, cap) for v in views])
    lines, kept = _window(views, budget_chars, focus or set())
    report = FitReport(mode="windowed", n_steps=n, shown_steps=len(kept), cap_chars=MIN_STEP_CHARS,
                       budget_tokens=budget_tokens, shown=[_shown(v, MIN_STEP_CHARS) for v in kept])
    return "\n".join(lines), report


def step_views(traj: Trajectory, indices: Sequence[int] | None = None, focus: set[int] | None = None) -> list[StepView]:
    """Plain views of ``traj``'s steps (all, or ``indices``); focus steps weigh 3×."""
    focus = focus or set()
    idx = range(traj.n_steps) if indices is None else indices
    return [
        StepView(index=i, agent=traj.steps[i].agent, text=traj.steps[i].content, weight=3.0 if i in focus else 1.0)
        for i in idx
    ]
