"""Scripted answers to the LLM attribution contracts (``attribution.*``): the test double's side of them.

They read the rendered log lines ``[i] agent: text`` in the prompt and treat a
step whose text contains the marker word ``ERROR`` as the decisive error, so
tests can check each method's plumbing end to end. Call-specific positions
(step under review, ranges) arrive as invoke metadata (``attr_*`` keys).
"""

from __future__ import annotations

import json
import re

from mas.scripted.model import ScriptedContext, responder

_LINE_RE = re.compile(r"^\[(\d+)\] ([^:\n]+): (.*)$", re.M)


def _lines(ctx: ScriptedContext) -> list[tuple[int, str, str]]:
    return [(int(m.group(1)), m.group(2).strip(), m.group(3)) for m in _LINE_RE.finditer(ctx.text())]


def _marked(ctx: ScriptedContext) -> list[tuple[int, str]]:
    return [(i, a) for i, a, text in _lines(ctx) if "ERROR" in text]


def _first(ctx: ScriptedContext) -> tuple[int, str]:
    marked = _marked(ctx)
    if marked:
        return marked[0]
    lines = _lines(ctx)
    return (lines[0][0], lines[0][1]) if lines else (0, "unknown")


@responder("attribution.all_at_once.answer")
def _all_at_once(ctx: ScriptedContext) -> str:
    step, agent = _first(ctx)
    return json.dumps({"reason": "the marked step is wrong", "agent": agent, "step": step})


@responder("attribution.step_by_step.judge_step")
def _judge_step(ctx: ScriptedContext) -> str:
    i = int(ctx.metadata.get("attr_step", -1))
    flagged = any(s == i for s, _ in _marked(ctx))
    return json.dumps({"reason": "checked the step", "error": "yes" if flagged else "no"})


@responder("attribution.binary_search.halve")
def _halve(ctx: ScriptedContext) -> str:
    lo, mid, hi = ctx.metadata.get("attr_range", [0, 0, 0])
    inside = [s for s, _ in _marked(ctx) if lo <= s <= hi]
    part = "B" if inside and inside[0] > mid else "A"
    return f'Looking at it... {{"reason": "the marker", "part": "{part}"}}'


def _agents_in(ctx: ScriptedContext) -> list[str]:
    return list(dict.fromkeys(a for _, a, _ in _lines(ctx)))


@responder("attribution.echo.agent_panel")
def _echo_agents(ctx: ScriptedContext) -> str:
    step, agent = _first(ctx)
    conf = round(0.6 + 0.3 * ctx.rng.random(), 2)
    evals = [
        {"agent": a, "error_likelihood": 0.8 if a == agent else 0.1, "evidence": "marker" if a == agent else "none"}
        for a in _agents_in(ctx)
    ]
    others = [a for a in _agents_in(ctx) if a != agent]
    alts = [{"agents": [others[0]], "step": step + 1, "confidence": 0.2}] if others else []
    return json.dumps({
        "summary": "one step carries the marker",
        "agents": evals,
        "conclusion": {"type": "wrong result", "agents": [agent], "step": step, "confidence": conf},
        "alternatives": alts,
    })


@responder("attribution.echo.step_panel")
def _echo_steps(ctx: ScriptedContext) -> str:
    # One judgment per candidate step: "yes" when the candidate's own line carries the marker.
    step = int(ctx.metadata.get("attr_step", -1))
    hit = any(s == step for s, _ in _marked(ctx))
    return json.dumps({
        "summary": "the marked step" if hit else "no marker here",
        "type": "wrong result" if hit else "none",
        "decisive_error": "yes" if hit else "no",
        "confidence": round(0.5 + 0.4 * ctx.rng.random(), 2),
    })


@responder("attribution.chief.decompose")
def _chief_decompose(ctx: ScriptedContext) -> str:
    # Deliberately overlapping and gapped ranges: the method must repair them into a cover.
    n = int(ctx.metadata.get("attr_n_steps", 1))
    half = n // 2
    subs = [{"name": "plan and compute", "start": 0, "end": half}, {"name": "check", "start": half, "end": max(half, n - 2)}]
    return json.dumps({"reason": "two phases", "subtasks": subs})


_VALUE_RE = re.compile(r"\b\d{2,}\b")


@responder("attribution.chief.graph")
def _chief_graph(ctx: ScriptedContext) -> str:
    # OTAR per asked (subtask, agent) pair; a data edge from the first line holding a number (2+ digits) to
    # each later line reusing it, a control edge to a line repeating an earlier line of the same agent.
    lo, hi = ctx.metadata.get("attr_range", [0, 0])
    lines = _lines(ctx)
    nodes = [{"subtask": sub, "agent": agent, "observation": "the previous step", "thought": "what to do next",
              "action": "acted on it", "result": "ERROR seen" if any("ERROR" in t for i, a, t in lines if a == agent)
              else "no error"} for sub, agent in ctx.metadata.get("attr_pairs", [])]
    first: dict[str, int] = {}
    edges = []
    for i, agent, text in lines:
        for v in sorted(set(_VALUE_RE.findall(text))):
            src = first.setdefault(v, i)
            if src != i and lo <= i <= hi:
                edges.append({"src": src, "dst": i, "type": "data"})
        same = [j for j, a, t in lines if j < i and a == agent and t == text]
        if same and lo <= i <= hi:
            edges.append({"src": same[-1], "dst": i, "type": "control"})
    return json.dumps({"reason": "values passed on", "nodes": nodes, "edges": edges[:8]})


@responder("attribution.chief.oracle")
def _chief_oracle(ctx: ScriptedContext) -> str:
    # One oracle per listed subtask ([index, first step, last step]); a subtask holding the marker failed.
    marked = [s for s, _ in _marked(ctx)]
    oracles = [
        {"subtask": i, "goal": "produce the right number", "preconditions": "data loaded", "key_evidence": "the marker",
         "acceptance": "no ERROR", "satisfied": "no" if any(lo <= s <= hi for s in marked) else "yes"}
        for i, lo, hi in ctx.metadata.get("attr_subtasks", [])
    ]
    return json.dumps({"oracles": oracles})


@responder("attribution.chief.agent")
def _chief_agent(ctx: ScriptedContext) -> str:
    return json.dumps({"reason": "marker", "agent": _first(ctx)[1]})


@responder("attribution.chief.step")
def _chief_step(ctx: ScriptedContext) -> str:
    return json.dumps({"reason": "marker", "step": _first(ctx)[0], "alternatives": []})


@responder("attribution.chief.counterfactual")
def _chief_counterfactual(ctx: ScriptedContext) -> str:
    # A step saying STALE used corrupted data: point one data edge back (its latest data source).
    step = int(ctx.metadata.get("attr_step", -1))
    text = next((t for i, _, t in _lines(ctx) if i == step), "")
    stale = "STALE" in text
    sources = [s for s in ctx.metadata.get("attr_sources", []) if s < step]
    source = sources[-1] if stale and sources else None
    return json.dumps({
        "reason": "marker", "fix_here_succeeds": "yes" if ("ERROR" in text or "SOURCE" in text) and not stale else "no",
        "input_was_wrong": "yes" if source is not None else "no", "source_step": source, "confidence": 0.8,
    })


def _score(ctx: ScriptedContext, noise: float) -> str:
    steps = set(ctx.metadata.get("attr_steps", []))
    hit = any(s in steps for s, _ in _marked(ctx))
    p = (0.85 if hit else 0.1) + noise * (ctx.rng.random() - 0.5)
    return f"{min(1.0, max(0.0, p)):.2f}"


@responder("attribution.llm_naive.score")
def _naive_score(ctx: ScriptedContext) -> str:
    return _score(ctx, 0.0)


@responder("attribution.llm_roles.score")
def _roles_score(ctx: ScriptedContext) -> str:
    return "Probability: " + _score(ctx, 0.1)
