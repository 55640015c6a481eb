"""The double's answers to Who&When's three baselines: ``attribution.all_at_once.answer``,
``attribution.step_by_step.judge_step`` and ``attribution.binary_search.halve``, in the paper's reply form when
the call's ``attr_prompts`` hint says ``paper``, else as the project's JSON. They read the case from the call's
hints (:mod:`mas.scripted.attribution.case`), never the prompt."""

from __future__ import annotations

import json

from mas.scripted.attribution.case import first_marked, hint, marked
from mas.scripted.scripting import ScriptedContext, responder


def _paper(ctx: ScriptedContext) -> bool:
    return hint(ctx, "attr_prompts") == "paper"


@responder("attribution.all_at_once.answer")
def all_at_once(ctx: ScriptedContext) -> str:
    step, agent = first_marked(ctx)
    if _paper(ctx):
        return f"Agent Name: {agent}\n Step Number: {step}\n Reason for Mistake: the marked step is wrong"
    return json.dumps({"reason": "the marked step is wrong", "agent": agent, "step": step})


@responder("attribution.step_by_step.judge_step")
def judge_step(ctx: ScriptedContext) -> str:
    i = int(hint(ctx, "attr_step", -1))
    flagged = any(s == i for s, _ in marked(ctx))
    if _paper(ctx):
        return f"1. {'Yes' if flagged else 'No'}.\n2. Reason: checked the step"
    return json.dumps({"reason": "checked the step", "error": "yes" if flagged else "no"})


@responder("attribution.binary_search.halve")
def halve(ctx: ScriptedContext) -> str:
    lo, mid, hi = hint(ctx, "attr_range", [0, 0, 0])
    inside = [s for s, _ in marked(ctx) if lo <= s <= hi]
    part = "B" if inside and inside[0] > mid else "A"
    if _paper(ctx):
        return "lower half" if part == "B" else "upper half"
    return f'Looking at it... {{"reason": "the marker", "part": "{part}"}}'
