"""CHIEF's counterfactual screening of a candidate step in the project variant: pruning, planning control, walk.

CHIEF's progressive causal screening (section 4.3) as ``chief(variant="project")``
does it, by rules and one call per visited step; Appendix F does it in one call
over the candidate set (the paper variant, :mod:`attribution.methods.chief.paper`). In order:

1. deviation-aware pruning (:func:`screen_candidates`): an error the agent
   corrected itself later, with no error after the fix, or whose output a
   later step corrected (a ``corrects`` edge of the graph), is dropped while
   other candidates remain;
2. planning control: a step inside a loop moves to the loop's first step
   (:func:`screen_candidates`); and the planner-vs-executor rule: when the
   candidate acted on a plan another agent wrote (:func:`plan_step`), the
   counterfactual call also asks whether the step followed that plan and
   whether the plan itself was wrong. An executor that followed a wrong plan
   hands the blame to the plan's step (the planner); an executor that
   deviated from the plan keeps it;
3. [1 call per visited step] the local + data-flow counterfactual
   (:func:`counterfactual`): would fixing this step have made the team
   succeed, or was its input already wrong, and in which earlier step? The
   walk (:func:`walk`) follows data edges back (the source must be a data
   ancestor along ``propagates`` edges: the counterfactual pattern on the
   graph's edges) and plan hops, each hop strictly earlier and every step visited
   once, until a step's input was fine. A walk whose last step the
   counterfactual rejects (fixing it would not have helped, its input was
   fine) is ``rejected``, and the search backtracks to the next candidate
   (:mod:`attribution.methods.chief.levels`).
"""

from __future__ import annotations

import re
from typing import Any

from attribution.llm.calls import CaseLedger
from attribution.llm.prompting import ENVIRONMENT_KEYS, messages, render_steps, resolve_step, step_views
from attribution.llm.replies import YesNo, contract, one_of, schema_of, text, unit
from attribution.methods.chief.graph import PROPAGATES, CausalGraph, corrected_downstream, loop_start, self_corrected
from attribution.methods.chief.model_graph import SYSTEM
from attribution.methods.chief.oracle import yes
from attribution.sources.trajectory import Trajectory
from mas.llm.confidence import parse_confidence

CF_SOURCES_SHOWN = 4
"""Direct data sources of a step shown with it in a counterfactual prompt (the latest ones)."""
PLAN_RE = re.compile(
    r"\b(plan\b|the plan|planned|step\s*\d+\s*[:.)]|steps? to (?:solve|follow)|first,|here is how|we (?:should|will) "
    r"(?:first|then))|(?m:^\s*1[.)]\s)",
    re.I,
)
"""A step that lays out a plan for others (this project's cue words; the paper's rule is stated, not its patterns)."""


def plan_step(traj: Trajectory, step: int) -> int | None:
    """The latest earlier step, by another agent that is not the environment, that lays out a plan; or None.

    >>> from attribution.sources.trajectory import Step
    >>> t = Trajectory(id="x", query="q", steps=[Step(index=0, agent="human", content="Plan: add."),
    ...     Step(index=1, agent="Planner", content="Plan: 1. load 2. sum"), Step(index=2, agent="Coder", content="x")])
    >>> plan_step(t, 2), plan_step(t, 1)
    (1, None)
    """
    agent = traj.steps[step].agent_key
    for j in range(step - 1, -1, -1):
        s = traj.steps[j]
        if s.agent_key != agent and s.agent_key not in ENVIRONMENT_KEYS and PLAN_RE.search(s.content or ""):
            return j
    return None


def screen_candidates(traj: Trajectory, graph: CausalGraph, candidates: list[int]) -> tuple[list[int], list[dict[str, Any]]]:
    """Deviation-aware pruning, then planning-control for loops; returns the screened order and a log."""
    log: list[dict[str, Any]] = []
    kept = []
    for c in candidates:
        fix = self_corrected(traj, c)
        if fix is not None and len(candidates) > 1:
            log.append({"step": c, "rule": "pruned_self_corrected", "by": fix})
            continue
        caught = corrected_downstream(graph, c)
        if caught is not None and len(candidates) > 1:
            log.append({"step": c, "rule": "pruned_corrected_downstream", "by": caught})
            continue
        kept.append(c)
    kept = kept or list(candidates)
    out = []
    for c in kept:
        start = loop_start(graph, c)
        if start != c:
            log.append({"step": c, "rule": "loop_to_first_iteration", "to": start})
        out.append(start)
    return list(dict.fromkeys(out)), log


async def counterfactual(ledger: CaseLedger, traj: Trajectory, header: str, graph: CausalGraph, step: int) -> dict[str, Any]:
    """Local + data-flow counterfactual on ``step`` (and the plan questions when it acted on another's plan).

    ``source_step`` is kept only when it is a data ancestor of ``step``
    (reachable back along data edges), so the walk follows the data flow.
    """
    ancestors = graph.data_ancestors(step)
    sources = graph.step_sources(step, "data", PROPAGATES)[-CF_SOURCES_SHOWN:]
    plan = plan_step(traj, step)
    plan_ask = "" if plan is None else (
        f"Step {plan} laid out a plan. Did step {step} follow that plan faithfully, and was the plan itself wrong? ")
    plan_keys = "" if plan is None else '"followed_plan": "yes" or "no", "plan_was_wrong": "yes" or "no", '
    ask = (
        f"Candidate decisive error: step {step}. Steps it takes data from: {sources or 'none'}.\n"
        f"If step {step} had been done correctly, would the team have succeeded? Or was the data it used already "
        f"wrong in an earlier step? {plan_ask}Reply with JSON only:\n"
        '{"reason": "<one sentence>", "fix_here_succeeds": "yes" or "no", "input_was_wrong": "yes" or "no", '
        f'"source_step": <earlier step number or null>, {plan_keys}"confidence": <0-1>}}'
    )

    def build(budget: int):
        shown = sorted({*sources, *([plan] if plan is not None else []),
                        *range(max(0, step - 2), min(traj.n_steps, step + 3))})
        log, report = render_steps(step_views(traj, shown, focus={step}), budget - 300, focus={step})
        return messages(SYSTEM, f"{header}\n\nSteps:\n{log}\n\n{ask}"), report

    source = one_of(ancestors) | None if ancestors else None
    fields: dict[str, Any] = {"reason": text(), "fix_here_succeeds": YesNo, "input_was_wrong": YesNo, "source_step": source}
    if plan is not None:
        fields |= {"followed_plan": YesNo, "plan_was_wrong": YesNo}
    schema = schema_of(contract("CounterfactualReply", **fields, confidence=unit()))
    hints = {"attr_step": step, "attr_sources": sources, "attr_ancestors": ancestors, "attr_plan_step": plan}
    reply = await ledger.ask("counterfactual", build, hints=hints, schema=schema)
    obj = ledger.parse("counterfactual", reply) or {}
    src = resolve_step(traj, obj.get("source_step"))
    out = {
        "step": step,
        "fix_here_succeeds": yes(obj.get("fix_here_succeeds")),
        "input_was_wrong": yes(obj.get("input_was_wrong")),
        "source_step": src if src in ancestors else None,
        "confidence": parse_confidence(obj.get("confidence"), None),
    }
    if plan is not None:
        out |= {"plan_step": plan, "followed_plan": yes(obj.get("followed_plan")),
                "plan_was_wrong": yes(obj.get("plan_was_wrong"))}
    return out


async def walk(ledger: CaseLedger, traj: Trajectory, header: str, graph: CausalGraph, start: int, budget: int,
               visited: set[int]) -> tuple[int, list[dict[str, Any]], str]:
    """The counterfactual walk from ``start`` (see the module docstring): (step, hops, why it stopped), the
    stop one of ``no_earlier_corruption``, ``rejected`` or ``budget`` (``budget`` calls at most)."""
    step, hops = start, []
    while len(hops) < budget:
        visited.add(step)
        cf = await counterfactual(ledger, traj, header, graph, step)
        hops.append(cf)
        src = cf["source_step"]
        if cf["input_was_wrong"] and src is not None and src not in visited:
            cf["hop"] = "data"
            step = src  # data-flow: move to where the corrupted data came from
            continue
        plan = cf.get("plan_step")
        if cf.get("followed_plan") and cf.get("plan_was_wrong") and plan is not None and plan not in visited:
            cf["hop"] = "planner"
            step = plan  # the executor followed a wrong plan: the planner is responsible
            continue
        if cf["fix_here_succeeds"] is False and len(hops) == 1:
            return step, hops, "rejected"  # the candidate itself, not a step a hop led to
        return step, hops, "no_earlier_corruption"
    return step, hops, "budget"
