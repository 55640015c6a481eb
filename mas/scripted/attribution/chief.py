"""The double's answers to CHIEF's contracts (``attribution.chief.*``): the project variant's (decompose,
reflect, graph, oracle, verdict, agent, step, counterfactual) and the paper variant's (decomposition, otar, edges,
step_edges, oracles, backtracking, counterfactual_attribution). They read the case from the call's hints
(:mod:`mas.scripted.attribution.case`), never the prompt."""

from __future__ import annotations

import json
import re

from mas.scripted.attribution.case import first_marked, hint, lines, marked
from mas.scripted.scripting import ScriptedContext, responder


@responder("attribution.chief.decompose")
def _chief_decompose(ctx: ScriptedContext) -> str:
    # Deliberately overlapping and gapped ranges: the method must repair them into a cover.
    n = int(hint(ctx, "attr_n_steps", 1))
    half = n // 2
    subs = [{"name": "plan and compute", "start": 0, "end": half}, {"name": "check", "start": half, "end": max(half, n - 2)}]
    return json.dumps({"reason": "two phases", "subtasks": subs})


@responder("attribution.chief.reflect")
def _chief_reflect(ctx: ScriptedContext) -> str:
    # The reflection keeps the proposed ranges as they are: the deterministic repair then makes them a cover.
    spans = [{"name": f"part {i + 1}", "start": a, "end": b} for i, (a, b) in enumerate(hint(ctx, "attr_proposed", []))]
    return json.dumps({"problems": "none found", "subtasks": spans})


_VALUE_RE = re.compile(r"\b\d{2,}\b")


@responder("attribution.chief.graph")
def _chief_graph(ctx: ScriptedContext) -> str:
    # OTAR per asked (subtask, agent) pair; a data edge from the first line holding a number (2+ digits) to
    # each later line reusing it (pattern "corrects" when the later line says CORRECTS), a control edge to a line
    # repeating an earlier line of the same agent.
    lo, hi = hint(ctx, "attr_range", [0, 0])
    shown = lines(ctx)
    nodes = [{"subtask": sub, "agent": agent, "observation": "the previous step", "thought": "what to do next",
              "action": "acted on it", "result": "ERROR seen" if any("ERROR" in t for i, a, t in shown if a == agent)
              else "no error"} for sub, agent in hint(ctx, "attr_pairs", [])]
    first: dict[str, int] = {}
    edges = []
    for i, agent, text in shown:
        for v in sorted(set(_VALUE_RE.findall(text))):
            src = first.setdefault(v, i)
            if src != i and lo <= i <= hi:
                edges.append({"src": src, "dst": i, "type": "data",
                              "pattern": "corrects" if "CORRECTS" in text else "propagates"})
        same = [j for j, a, t in shown if j < i and a == agent and t == text]
        if same and lo <= i <= hi:
            edges.append({"src": same[-1], "dst": i, "type": "control", "pattern": "repeats"})
    return json.dumps({"reason": "values passed on", "nodes": nodes, "edges": edges[:8]})


@responder("attribution.chief.oracle")
def _chief_oracle(ctx: ScriptedContext) -> str:
    # One oracle per listed subtask ([index, first step, last step]), written without the steps.
    oracles = [
        {"subtask": i, "goal": "produce the right number", "preconditions": "data loaded", "key_evidence": "the marker",
         "acceptance": "no ERROR"}
        for i, _, _ in hint(ctx, "attr_subtasks", [])
    ]
    return json.dumps({"oracles": oracles})


@responder("attribution.chief.verdict")
def _chief_verdict(ctx: ScriptedContext) -> str:
    # A subtask holding the marker failed its oracle.
    hits = [s for s, _ in marked(ctx)]
    verdicts = [{"subtask": i, "reason": "marker" if any(lo <= s <= hi for s in hits) else "clean",
                 "satisfied": "no" if any(lo <= s <= hi for s in hits) else "yes"}
                for i, lo, hi in hint(ctx, "attr_subtasks", [])]
    return json.dumps({"verdicts": verdicts})


@responder("attribution.chief.agent")
def _chief_agent(ctx: ScriptedContext) -> str:
    return json.dumps({"reason": "marker", "agent": first_marked(ctx)[1]})


@responder("attribution.chief.step")
def _chief_step(ctx: ScriptedContext) -> str:
    return json.dumps({"reason": "marker", "step": first_marked(ctx)[0], "alternatives": []})


@responder("attribution.chief.counterfactual")
def _chief_counterfactual(ctx: ScriptedContext) -> str:
    # A step saying STALE used corrupted data: point one data edge back (its latest data source). A step saying
    # HARMLESS did no harm (fixing it would not help). A step saying PLANNED followed the plan of the plan step
    # (``attr_plan_step``), and that plan was wrong when its line says BADPLAN.
    step = int(hint(ctx, "attr_step", -1))
    shown = {i: t for i, _, t in lines(ctx)}
    text = shown.get(step, "")
    stale = "STALE" in text
    sources = [s for s in hint(ctx, "attr_sources", []) if s < step]
    source = sources[-1] if stale and sources else None
    decisive = ("ERROR" in text or "SOURCE" in text or "BADPLAN" in text) and not stale and "HARMLESS" not in text
    reply = {
        "reason": "marker", "fix_here_succeeds": "yes" if decisive else "no",
        "input_was_wrong": "yes" if source is not None else "no", "source_step": source, "confidence": 0.8,
    }
    plan = hint(ctx, "attr_plan_step")
    if plan is not None:
        reply |= {"followed_plan": "yes" if "PLANNED" in text else "no",
                  "plan_was_wrong": "yes" if "BADPLAN" in shown.get(plan, "") else "no"}
    return json.dumps(reply)


# ---- the paper variant's prompts ----


@responder("attribution.chief.decomposition")
def _paper_decomposition(ctx: ScriptedContext) -> str:
    # Two halves of the log (the repair makes any reply a cover).
    n = int(hint(ctx, "attr_n_steps", 1))
    half = max(0, (n - 1) // 2)
    subs = [{"name": "plan and compute", "start": 0, "end": half}]
    if n > 1:
        subs.append({"name": "check and answer", "start": half + 1, "end": n - 1})
    return json.dumps({"reflection": "the ranges follow the dialogue", "subtasks": subs})


@responder("attribution.chief.otar")
def _paper_otar(ctx: ScriptedContext) -> str:
    shown = lines(ctx)
    by_subtask: dict[int, list[dict[str, str]]] = {}
    for k, agent in hint(ctx, "attr_pairs", []):
        erred = any("ERROR" in t for _, a, t in shown if a == agent)
        by_subtask.setdefault(k, []).append({"agent": agent, "action": "acted on it", "observation": "the previous step",
                                             "thought": "what to do next", "result": "ERROR seen" if erred else "no error"})
    return json.dumps({"subtasks": [{"subtask": f"S{k + 1}", "agents": v} for k, v in by_subtask.items()]})


@responder("attribution.chief.edges")
def _paper_edges(ctx: ScriptedContext) -> str:
    ids = hint(ctx, "attr_subtasks", [])
    pattern = {"bias": "a wrong value upstream", "anomaly": "a wrong result downstream"}
    return json.dumps({"edges": [{"from": a, "to": b, "subtask": None, "type": "data_dependency",
                                  "counterfactual_patterns": [pattern]} for a, b in zip(ids, ids[1:])]})


@responder("attribution.chief.step_edges")
def _paper_step_edges(ctx: ScriptedContext) -> str:
    # From the first line holding a number (2+ digits) to each later line reusing it.
    first: dict[str, int] = {}
    edges = []
    for i, _, text in lines(ctx):
        for v in sorted(set(_VALUE_RE.findall(text))):
            src = first.setdefault(v, i)
            if src != i:
                edges.append({"upstream": src, "output_data": v, "output_type": "numeric", "downstream": i,
                              "input_data": v, "input_type": "numeric"})
    return json.dumps({"step_edges": edges[:8]})


@responder("attribution.chief.oracles")
def _paper_oracles(ctx: ScriptedContext) -> str:
    return json.dumps({"oracles": [{"subtask": s, "goal": f"goal of {s}", "precondition": "data loaded",
                                    "key_evidence": "the marker", "acceptance_criteria": "no ERROR"}
                                   for s in hint(ctx, "attr_subtasks", [])]})


@responder("attribution.chief.backtracking")
def _paper_backtracking(ctx: ScriptedContext) -> str:
    # The marked step, its agent and the subtask holding it.
    step, agent = first_marked(ctx)
    subs = [s for s, lo, hi in hint(ctx, "attr_ranges", []) if lo <= step <= hi]
    return json.dumps({"reason": "the marker", "candidate_error_subtasks": subs, "candidate_error_agents": [agent],
                       "candidate_error_steps": [step]})


@responder("attribution.chief.counterfactual_attribution")
def _paper_counterfactual(ctx: ScriptedContext) -> str:
    step, agent = first_marked(ctx)
    return json.dumps({"reason_for_mistake": "the marked step", "agent_name": agent, "step_number": step})
