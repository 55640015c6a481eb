"""The double's answers to the LLM step scorers' contracts: ``attribution.llm_naive.score``,
``attribution.llm_roles.summary`` and ``attribution.llm_roles.score``. A segment (its steps in the call's
``attr_steps`` hint) holding a marked line scores high. They read the case from the call's hints
(:mod:`mas.scripted.attribution.case`), never the prompt."""

from __future__ import annotations

import json

from mas.scripted.attribution.case import hint, marked
from mas.scripted.scripting import ScriptedContext, responder


def _probability(ctx: ScriptedContext, noise: float) -> float:
    steps = set(hint(ctx, "attr_steps", []))
    hit = any(s in steps for s, _ in marked(ctx))
    return min(1.0, max(0.0, (0.85 if hit else 0.1) + noise * (ctx.rng.random() - 0.5)))


@responder("attribution.llm_naive.score")
def naive_score(ctx: ScriptedContext) -> str:
    return f"{_probability(ctx, 0.0):.2f}"


@responder("attribution.llm_roles.summary")
def roles_summary(ctx: ScriptedContext) -> str:
    hits = marked(ctx)
    return f"The team failed at step {hits[0][0]} ({hits[0][1]})." if hits else "No step stands out."


@responder("attribution.llm_roles.score")
def roles_score(ctx: ScriptedContext) -> str:
    steps = list(hint(ctx, "attr_steps", [0]))
    p = _probability(ctx, 0.1)
    return json.dumps({"investigation_summary": f"{hint(ctx, 'attr_role')} view of the segment",
                       "primary_conclusion": {"agent": "unknown", "mistake_step": steps[0], "confidence": round(p, 2),
                                              "evidence": [], "reason": "the marker", "alternative_explanations": []}})
