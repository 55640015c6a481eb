"""The double's answers to ECHO's contracts: the project variant's panels (``attribution.echo.agent_panel``,
``attribution.echo.step_panel``) and the paper variant's decoupled analyses (``attribution.echo.agent_analysis``,
``attribution.echo.step_analysis``). The marked line's agent and step are the conclusion. They read the case from
the call's hints (:mod:`mas.scripted.attribution.case`), never the prompt."""

from __future__ import annotations

import json

from mas.scripted.attribution.case import agents_in, first_marked, hint, marked
from mas.scripted.scripting import ScriptedContext, responder


@responder("attribution.echo.agent_panel")
def agent_panel(ctx: ScriptedContext) -> str:
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
def step_panel(ctx: ScriptedContext) -> str:
    # One judgment per candidate step: "yes" when the candidate's own line carries the marker.
    step = int(hint(ctx, "attr_step", -1))
    hit = any(s == step for s, _ in marked(ctx))
    return json.dumps({
        "summary": "the marked step" if hit else "no marker here",
        "type": "wrong result" if hit else "none",
        "decisive_error": "yes" if hit else "no",
        "confidence": round(0.5 + 0.4 * ctx.rng.random(), 2),
    })


@responder("attribution.echo.agent_analysis")
@responder("attribution.echo.step_analysis")
def analysis(ctx: ScriptedContext) -> str:
    step, agent = first_marked(ctx)
    others = [a for a in agents_in(ctx) if a != agent]
    conf = round(0.6 + 0.3 * ctx.rng.random(), 2)
    return json.dumps({
        "analysis_summary": "one step carries the marker",
        "agent_evaluations": [{"agent_name": a, "step_index": step, "reasoning": "marker" if a == agent else "none",
                               "evidence": "the marked line" if a == agent else "none",
                               "error_likelihood": 0.8 if a == agent else 0.1} for a in agents_in(ctx)[:3]],
        "primary_conclusion": {"reasoning": "the marked step", "type": "single_agent", "attribution": [agent],
                               "mistake_step": step, "confidence": conf},
        "alternative_hypotheses": [{"reasoning": "next step", "type": "single_agent", "attribution": others[:1],
                                    "mistake_step": step + 1, "confidence": 0.2}] if others else [],
    })
