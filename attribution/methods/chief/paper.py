"""CHIEF as its appendices write it: the paper variant of ``chief`` (CHIEF sections 4.1-4.3, Appendices A-F).

After the graph (:mod:`attribution.methods.chief.hcg`: A decomposition, B OTAR, C edges):

- D, oracle synthesis (``attribution.chief.oracles``): for every subtask, in
  order, a virtual oracle: Goal, Precondition, Key Evidence, Acceptance
  Criteria. Eq. 2: ``O_k = F_gen(I, O_<k, tau_>k, tau_s)``; the prompt holds
  the problem (I), the whole conversation, whose steps from subtask k's
  first step on are the trajectory still to be explained (tau_>k), the
  retrieved reference examples (tau_s) and the subtask plan, and asks for the
  oracles in subtask order, each written under the earlier ones (O_<k), with
  D's global self-check (no contradiction, preconditions only on what is
  available at the subtask's start, only essential key evidence, falsifiable
  acceptance criteria). One call when the reply budget holds every oracle,
  else consecutive batches, each shown the oracles already written as the
  previous oracle constraints (:func:`attribution.methods.chief.oracle.oracle_batches`).
- E, hierarchical backtracking (``attribution.chief.backtracking``, one
  call): on the graph with its oracles, the subtask level in reverse
  topological order (output against Goal and Acceptance Criteria), the agent
  level (OTAR against Precondition and Key Evidence), the step level
  (execution details against the OTAR and the whole oracle), each a binary
  decision made inside the call; the reply is the three candidate sets.
- F, counterfactual attribution (``attribution.chief.counterfactual_attribution``,
  one call): the candidate set and the graph, with F's four stages (local
  attribution over the predecessors and the edges' patterns;
  planning-control over loop groups, planner against executor; data-flow
  back to the first corruption; the reversibility filter and the
  irrecoverability tie-break) and its decision rule; the reply is one agent,
  one step and the reason.

Calls per case: 1 (A) + B + 2 (C) + D + 1 (E) + 1 (F), with B and D usually 1
each (more when one reply cannot hold every subtask): 7 on a short log.
Every prompt shows the whole conversation; a log too long for the window is
fitted as every prompt of this project is (texts cut, far steps collapsed),
keeping B's batch of subtasks and F's candidate steps in view.
Fallbacks, each recorded in ``details.fallbacks``: equal chunks for an
unusable decomposition, regex tuples for agents B left out, an empty oracle
field, no candidates from an unusable E, and for an unusable F the first
candidate step, else the model-free guess. Replies are JSON in the project's
order (reasons first); F gives no confidence, so the prediction's is 0.5
(0 for a fallback).
"""

from __future__ import annotations

from typing import Any

from attribution.llm.calls import CaseLedger, new_ledger
from attribution.llm.prompt_fit import clip
from attribution.llm.prompting import agent_names, case_header, finish, heuristic_guess, resolve_actor, resolve_step
from attribution.llm.replies import contract, many, one_of, schema_of, step_in, text
from attribution.methods.chief.exemplars import retrieve
from attribution.methods.chief.hcg import HCG, ask, build_hcg, exemplars_text, graph_text, listing, parse_sid, sid
from attribution.methods.chief.oracle import ORACLE_REPLY_TOKENS, oracle_batches
from attribution.methods.base import MethodContext, Prediction
from attribution.sources.trajectory import Trajectory

ORACLE_KEYS = ("goal", "precondition", "key_evidence", "acceptance_criteria")
ORACLE_CHARS = 60
GRAPH_SHARE = 0.4
"""Share of a prompt's budget the graph text may take (the conversation gets the rest)."""
MAX_CANDIDATE_STEPS = 6


def oracle_text(graph: HCG, indices: list[int]) -> str:
    return "\n".join(f"{sid(k)}: " + "; ".join(f"{key.replace('_', ' ')}: {graph.oracles[k].get(key, '')}"
                                             for key in ORACLE_KEYS) for k in indices if k in graph.oracles)


async def synthesize_oracles(ledger: CaseLedger, traj: Trajectory, header: str, graph: HCG, rag: str) -> None:
    """D: every subtask's oracle, in order, into ``graph.oracles`` (module docstring)."""
    subs = graph.subtasks
    for batch in oracle_batches(subs, ledger.reply_tokens, per_item=ORACLE_REPLY_TOKENS):
        ids = [sid(s.index) for s in batch]
        item = contract("VirtualOracle", subtask=one_of(ids), **{k: text(ORACLE_CHARS) for k in ORACLE_KEYS})
        schema = schema_of(contract("OraclesReply", oracles=many(item, len(batch), len(batch))))
        written = [s.index for s in subs if s.index in graph.oracles]
        before = "\n\n".join(part for part in (
            f"Retrieved reference examples:\n{rag}" if rag else "",
            f"The subtask plan from the decomposition:\n{listing(subs)}",
            f"Oracles already written (previous oracle constraints):\n{oracle_text(graph, written)}" if written else "",
        ) if part)
        task = (
            f"Write the virtual oracle of {', '.join(ids)}, in subtask order. Draft the oracle of each subtask from "
            "the problem, the reference examples, the conversation from that subtask's first step on (what is "
            "still to happen) and the oracles of the subtasks before it, treating those as constraints. Then check "
            "them together: no oracle contradicts the problem or an earlier oracle; a Precondition depends only on "
            "what is available at the subtask's start (upstream outputs, environment state, what earlier oracles "
            "imply); Key Evidence lists only the essential facts, tool-return fields or intermediate quantities to "
            "verify in this subtask; Acceptance Criteria can be checked after execution and can fail. Reply with "
            'JSON only: {"oracles": [{"subtask": "S1", "goal": "<what it should achieve>", "precondition": "<upstream '
            'outputs or environment states>", "key_evidence": "<what to verify>", "acceptance_criteria": "<pass/fail '
            'test>"}]}'
        )
        hints = {"attr_subtasks": ids, "attr_written": [sid(k) for k in written]}
        reply = await ask(ledger, "oracles", traj, header, task, schema, hints, before)
        obj = ledger.parse("oracles", reply) or {}
        items = [i for i in obj.get("oracles", []) if isinstance(i, dict)] if isinstance(obj.get("oracles"), list) else []
        got: dict[int, dict[str, Any]] = {}
        for pos, it in enumerate(items):
            k = parse_sid(it.get("subtask"), len(subs))
            k = k if k in {s.index for s in batch} else batch[pos].index if pos < len(batch) else None
            if k is not None:
                got.setdefault(k, it)
        for s in batch:
            if s.index not in got:
                ledger.note_fallback("oracles", f"missing_{sid(s.index)}")
            graph.oracles[s.index] = {k: clip(str((got.get(s.index) or {}).get(k) or ""), 200) for k in ORACLE_KEYS}


def _graph_before(graph: HCG, extra: str = "") -> Any:
    def before(budget: int) -> str:
        shown = graph_text(graph, max(400, int(budget * GRAPH_SHARE) * 4))
        return f"{extra}\n\nThe hierarchical causal graph:\n{shown}" if extra else f"The hierarchical causal graph:\n{shown}"
    return before


async def backtrack(ledger: CaseLedger, traj: Trajectory, header: str, graph: HCG) -> dict[str, Any]:
    """E: the candidate error subtasks, agents and steps (empty when the reply is unusable)."""
    ids = [sid(s.index) for s in graph.subtasks]
    names = agent_names(traj)
    schema = schema_of(contract("BacktrackingReply", reason=text(160), candidate_error_subtasks=many(one_of(ids), len(ids)),
                                candidate_error_agents=many(one_of(names), min(4, len(names))),
                                candidate_error_steps=many(step_in(0, max(0, traj.n_steps - 1)), MAX_CANDIDATE_STEPS)))
    task = (
        "Perform hierarchical failure backtracking on this graph:\n"
        "1) Subtask level: go through the subtasks in reverse topological order along the subtask edges (last to "
        "first when there are none). For each, take its actual output from the conversation within its step "
        "range and compare it with its oracle's Goal and Acceptance Criteria; decide internally whether they "
        "disagree (1) or not (0). A subtask that disagrees is a candidate error subtask.\n"
        "2) Agent level: for each candidate subtask, compare each of its agents' observation, thought, action and "
        "result with the oracle's Precondition and Key Evidence; an agent that disagrees is a candidate error agent.\n"
        "3) Step level: for each candidate agent in a candidate subtask, check each of its steps there. Take the "
        "step's concrete execution details (tool input and output, intermediate values, cited facts, variable "
        "references) and cross-check them against the agent's observation/thought/action/result and the "
        "subtask's whole oracle (Goal, Precondition, Key Evidence, Acceptance Criteria); a step that disagrees "
        "is a candidate error step.\n"
        'Reply with JSON only: {"reason": "<one sentence>", "candidate_error_subtasks": ["S1"], '
        '"candidate_error_agents": ["<agent>"], "candidate_error_steps": [<step>]}'
    )
    reply = await ask(ledger, "backtracking", traj, header, task, schema,
                      {"attr_ranges": [[sid(s.index), s.start, s.end] for s in graph.subtasks]}, _graph_before(graph))
    obj = ledger.parse("backtracking", reply) or {}

    def listed(key: str) -> list[Any]:
        return obj.get(key) if isinstance(obj.get(key), list) else []

    out = {
        "subtasks": list(dict.fromkeys(k for k in (parse_sid(v, len(ids)) for v in listed("candidate_error_subtasks"))
                                       if k is not None)),
        "agents": list(dict.fromkeys(a for a in (resolve_actor(traj, v) for v in listed("candidate_error_agents")) if a)),
        "steps": list(dict.fromkeys(s for s in (resolve_step(traj, v) for v in listed("candidate_error_steps"))
                                    if s is not None)),
        "reason": clip(str(obj.get("reason") or ""), 300),
    }
    if not (out["subtasks"] or out["agents"] or out["steps"]):
        ledger.note_fallback("backtracking", "no_candidates")
    return out


def candidate_text(traj: Trajectory, graph: HCG, cands: dict[str, Any]) -> str:
    subs = [graph.subtasks[k] for k in cands["subtasks"]]
    steps = ", ".join(f"[{s}] {traj.steps[s].agent}" for s in cands["steps"]) or "none"
    return ("The candidate set from backtracking:\n"
            f"candidate error subtasks: {'; '.join(f'{sid(s.index)} (steps {s.start}-{s.end})' for s in subs) or 'none'}\n"
            f"candidate error agents: {', '.join(cands['agents']) or 'none'}\n"
            f"candidate error steps: {steps}")


async def attribute(ledger: CaseLedger, traj: Trajectory, header: str, graph: HCG,
                    cands: dict[str, Any]) -> dict[str, Any]:
    """F: the single most responsible agent and step, and why (``basis``: model, candidate or heuristic)."""
    names = agent_names(traj)
    schema = schema_of(contract("AttributionReply", reason_for_mistake=text(300), agent_name=one_of(names),
                                step_number=step_in(0, max(0, traj.n_steps - 1))))
    task = (
        "Identify the SINGLE most responsible mistake that led directly to the wrong final result. Reason over the "
        "candidate error steps in these stages:\n"
        "A. Local attribution: for each candidate step, use the graph's predecessors and the counterfactual "
        "patterns on its edges to judge whether an upstream step explains its anomaly under the oracle. If none "
        "does and the step received valid inputs yet produced a wrong output, it is a strong local root cause.\n"
        "B. Planning-control attribution: use the loop groups to see whether the failure comes from repeated "
        "cycles. The planner is responsible when, despite repeated error signals, it repeats the same thoughts or "
        "commands and does not adapt its strategy; the executor is responsible when the planner proposes valid "
        "strategy changes and the execution still yields abnormal results.\n"
        "C. Data-flow attribution: use the step edges to trace how key data is produced and used; decide whether "
        "a candidate fabricates data (no upstream basis), misreads upstream data, or misuses correct data. If an "
        "error travels through data, prefer the earliest step where valid inputs were first corrupted.\n"
        "D. Final screening: a deviation that a later step corrects (the oracle holds again) carries little "
        "responsibility compared with one never undone; among the rest prefer the step that first makes recovery "
        "hard or impossible, rather than merely the earliest deviation.\n"
        "Choose the one step that is a true origin (local, or the earliest data corruption), passes the final "
        "screening, and has the strongest downstream effect; name the agent at that step and its step number, and "
        "explain in 2-3 sentences which stages support the choice. Reply with JSON only: "
        '{"reason_for_mistake": "<2-3 sentences>", "agent_name": "<agent>", "step_number": <step>}'
    )
    hints = {"attr_candidate_steps": cands["steps"], "attr_candidate_agents": cands["agents"]}
    # A log too long for the window keeps the candidate steps (and their neighbours) in view.
    reply = await ask(ledger, "counterfactual_attribution", traj, header, task, schema, hints,
                      _graph_before(graph, candidate_text(traj, graph, cands)), focus=set(cands["steps"]) or None)
    obj = ledger.parse("counterfactual_attribution", reply) or {}
    step, agent = resolve_step(traj, obj.get("step_number")), resolve_actor(traj, obj.get("agent_name"))
    reason = clip(str(obj.get("reason_for_mistake") or ""), 400)
    if step is not None:
        return {"agent": agent, "step": step, "reason": reason, "basis": "model"}
    if cands["steps"]:
        ledger.note_fallback("counterfactual_attribution", "first_candidate_step")
        return {"agent": agent, "step": cands["steps"][0], "reason": reason, "basis": "candidate"}
    ledger.note_fallback("counterfactual_attribution", "heuristic")
    h_agent, h_step = heuristic_guess(traj)
    return {"agent": agent or h_agent, "step": h_step, "reason": reason, "basis": "heuristic"}


async def chief_paper(traj: Trajectory, ctx: MethodContext, n_exemplars: int) -> Prediction:
    """The paper variant on one case (module docstring)."""
    ledger = new_ledger(ctx, "chief")
    header = case_header(traj, ctx.with_ground_truth)
    exemplars = retrieve(traj, n_exemplars)
    rag = exemplars_text(exemplars)
    graph, how = await build_hcg(ledger, traj, header, rag)
    await synthesize_oracles(ledger, traj, header, graph, rag)
    cands = await backtrack(ledger, traj, header, graph)
    found = await attribute(ledger, traj, header, graph, cands)
    details = {
        "variant": "paper",
        "exemplars": [{"id": ex["id"], "similarity": round(sim, 4)} for ex, sim in exemplars],
        "decomposition": how,
        "graph": graph.record(),
        "candidates": cands,
        "attribution": found,
    }
    return finish(ledger, traj, found["agent"], found["step"], 0.5 if found["basis"] == "model" else 0.0, details)
