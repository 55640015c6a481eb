"""CHIEF: hierarchical causal graph, virtual oracles, top-down backtracking, counterfactual screening.

Pipeline per case (model calls in brackets):

1. [1] decompose the log into subtasks, with the ``exemplars`` (default 2)
   most similar decompositions retrieved from a pool built from the Who&When
   dev split's training part (:mod:`._chief_exemplars`: TF-IDF similarity,
   never the case's own record or question) as few-shot; the reply is
   repaired into contiguous ranges covering every step once (at most
   MAX_SUBTASKS = 8).
2. [1 per batch of subtasks, usually 1] the causal graph by the model: OTAR
   tuples per agent and subtask, step ``data``/``control`` edges
   (:mod:`._chief_model_graph`), plus the structural handoff and subtask
   edges. When the model's graph is unusable the regex graph
   (:func:`._chief_graph.build_graph`) stands in, recorded in
   ``details.fallbacks``; ``graph="regex"`` uses it always (no call).
3. [1 to #subtasks, twice] a virtual oracle for *every* subtask
   (:mod:`._chief_oracle`): synthesised from the task and the decomposition
   alone (goal, preconditions, key evidence, acceptance criteria; 5 a call
   at 512 reply tokens), then judged in calls of their own against the
   subtasks' steps (whether they met the criteria; batched as the reply and
   the prompt allow, a long subtask alone).
4. Oracle-guided backtracking, top-down and in reverse (:func:`backtrack`):
   from the last subtask that failed its oracle, the walk moves back along
   the graph's subtask edges (sequential and data) to a failed parent, the
   latest first, until no parent failed; that subtask is the origin (the
   last subtask when none admits failure). Then top-down inside it: [≤ 1]
   the responsible agent (skipped when only one agent acts there), [≤ 1] its
   candidate steps (skipped for a single step).
5. Counterfactual screening of the candidates, in order:
   deviation-aware pruning (an error the agent corrected itself later, with
   no error after the fix, is dropped while other candidates remain);
   planning-control (a step inside a loop is moved to the loop's first
   step); [1 per visited step] local + data-flow counterfactual: "would
   fixing this step have made the team succeed, or was its input already
   wrong, and in which earlier step?". The walk follows data edges back
   (the source must be a data ancestor of the step) until a step's input
   was not corrupted, so it ends at the first corrupted data. Every step is
   visited at most once and each hop moves strictly earlier (the loop
   guard); MAX_WALK_CALLS caps the calls as a cost guard (recorded as
   ``walk_stop: "budget"`` when it cuts a walk).

Model calls per case: at most 1 + G + 2 * #subtasks + 2 + MAX_WALK_CALLS, with
G graph calls (1 on short logs, at most #subtasks); typically 6-9 on a log
that fits the window. Re-sends after a length refusal or a transient failure
are counted too. ``attribute`` leaves the exemplar pool's own records out of
an evaluation (``run.is_training_record``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from attribution.methods import _chief_scripted  # noqa: F401  (registers the double's answers to CHIEF's prompts)
from attribution.methods._chief_exemplars import is_pool_record, retrieve
from attribution.methods._chief_graph import (
    CausalGraph,
    Subtask,
    actors,
    build_graph,
    fallback_subtasks,
    loop_start,
    repair_subtasks,
    self_corrected,
)
from attribution.methods._chief_model_graph import model_graph
from attribution.methods._chief_oracle import _oracle_items, oracle_batches, oracles, yes  # noqa: F401  (re-exported)
from attribution.llm.calls import CaseLedger, new_ledger
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.llm.prompting import (
    case_header,
    clip,
    display_agent,
    estimate_tokens,
    finish,
    messages,
    render_steps,
    resolve_agent,
    resolve_step,
    step_views,
    steps_of,
)
from attribution.llm.replies import YesNo, contract, many, one_of, schema_of, step_in, text, unit
from attribution.sources.trajectory import Trajectory, normalize_agent
from mas.llm.confidence import parse_confidence

MAX_WALK_CALLS = 8
"""Cost guard on counterfactual calls per case (one per visited step of the data-flow walk)."""
CF_SOURCES_SHOWN = 4
"""Direct data sources of a step shown with it in a counterfactual prompt (the latest ones)."""
SYSTEM = (
    "You analyse the log of a multi-agent team that failed its task, to find the decisive error: the earliest "
    "step whose mistake caused the failure. Be brief. Answer in JSON only."
)


def _log(traj: Trajectory, indices: range | list[int], budget: int, focus: set[int] | None = None) -> tuple[str, Any]:
    return render_steps(step_views(traj, list(indices), focus=focus), budget, focus=focus)


# ------------------------------------------------------------------ stages


def exemplar_text(exemplars: list[tuple[dict[str, Any], float]]) -> str:
    """The retrieved exemplars as the decomposition prompt shows them."""
    parts = []
    for n, (ex, _) in enumerate(exemplars, 1):
        spans = json.dumps(ex["subtasks"], ensure_ascii=False)
        parts.append(f"Example {n} log:\n{ex['log']}\nExample {n} subtasks: {spans}")
    return "\n\n".join(parts)


async def decompose(ledger: CaseLedger, traj: Trajectory, header: str,
                    exemplars: list[tuple[dict[str, Any], float]]) -> tuple[list[Subtask], str]:
    """Subtasks from the model (``exemplars`` as few-shot), repaired; equal chunks when the reply is unusable."""
    shown = exemplar_text(exemplars)
    ask = (
        "Split the log into 2-6 subtasks of consecutive steps that together cover every step. Reply with JSON only:\n"
        '{"reason": "<one sentence>", "subtasks": [{"name": "<short>", "start": <first step>, "end": <last step>}]}'
    )

    def build(budget: int):
        text, report = _log(traj, range(traj.n_steps), budget - 350 - estimate_tokens(shown))
        user = f"{shown}\n\n{header}\n\nLog:\n{text}\n\n{ask}" if shown else f"{header}\n\nLog:\n{text}\n\n{ask}"
        return messages(SYSTEM, user), report

    last = traj.n_steps - 1
    span = contract("Span", name=text(40), start=step_in(0, last), end=step_in(0, last))
    schema = schema_of(contract("DecomposeReply", reason=text(), subtasks=many(span, 6, 1)))
    meta = {"attr_n_steps": traj.n_steps, "attr_exemplars": [ex["id"] for ex, _ in exemplars]}
    reply = await ledger.ask("decompose", build, meta=meta, schema=schema)
    obj = ledger.parse("decompose", reply) or {}
    subs = repair_subtasks(obj.get("subtasks"), traj.n_steps)
    if subs:
        return subs, "model"
    ledger.note_fallback("decompose", "equal_chunks")
    return fallback_subtasks(traj), "equal_chunks"


async def pick_agent(ledger: CaseLedger, traj: Trajectory, header: str, graph: CausalGraph, sub: Subtask, verdict: dict[str, Any]) -> tuple[str, str]:
    """The responsible agent inside ``sub``, and how it was chosen."""
    names = actors(traj, sub)
    if len(names) == 1:
        return names[0], "only_agent"
    tuples = "\n".join(
        f"- {name}: " + "; ".join(f"{k}: {v}" for k, v in graph.otar.get((sub.index, normalize_agent(name)), {}).items())
        for name in names
    )
    ask = (
        f"This subtask failed. Goal: {verdict.get('goal') or sub.name}. Acceptance: {verdict.get('acceptance') or 'n/a'}.\n"
        f"Which of these agents caused the failure: {', '.join(names)}? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "agent": "<name>"}'
    )

    def build(budget: int):
        text, report = _log(traj, sub.steps, budget - 350 - len(tuples) // 4)
        user = f"{header}\n\nAgents' observation/thought/action/result:\n{tuples}\n\nSteps:\n{text}\n\n{ask}"
        return messages(SYSTEM, user), report

    schema = schema_of(contract("AgentReply", reason=text(), agent=one_of(names)))
    reply = await ledger.ask("agent", build, meta={"attr_range": [sub.start, sub.end]}, schema=schema)
    obj = ledger.parse("agent", reply) or {}
    agent = resolve_agent(traj, obj.get("agent"))
    if agent in names:
        return agent, "model"
    ledger.note_fallback("agent", "first_actor")
    return names[0], "first_actor"


async def pick_steps(ledger: CaseLedger, traj: Trajectory, header: str, sub: Subtask, agent: str) -> list[int]:
    """Candidate steps of ``agent`` in ``sub``, the model's choice first, then its alternatives, then the rest."""
    own = steps_of(traj, agent, sub.steps)
    if len(own) <= 1:
        return own or [sub.start]
    ask = (
        f"Which step of {agent} (steps {', '.join(map(str, own))}) is the decisive error? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "step": <step number>, "alternatives": [<step number>]}'
    )

    def build(budget: int):
        text, report = _log(traj, sub.steps, budget - 250, focus=set(own))
        return messages(SYSTEM, f"{header}\n\nSteps:\n{text}\n\n{ask}"), report

    schema = schema_of(contract("StepReply", reason=text(), step=one_of(own), alternatives=many(one_of(own), 2)))
    reply = await ledger.ask("step", build, meta={"attr_candidates": own}, schema=schema)
    obj = ledger.parse("step", reply) or {}
    alts = obj.get("alternatives") if isinstance(obj.get("alternatives"), list) else []
    picked = [s for s in (resolve_step(traj, v) for v in [obj.get("step"), *alts]) if s is not None]
    if not picked:
        ledger.note_fallback("step", "agent_steps_in_order")
    return list(dict.fromkeys([s for s in picked if s in own] + own))


async def counterfactual(ledger: CaseLedger, traj: Trajectory, header: str, graph: CausalGraph, step: int) -> dict[str, Any]:
    """Local + data-flow counterfactual on ``step``: would fixing it succeed, or was its input wrong, and where?

    ``source_step`` is kept only when it is a data ancestor of ``step``
    (reachable back along data edges), so the walk follows the data flow.
    """
    ancestors = graph.data_ancestors(step)
    sources = graph.step_sources(step, "data")[-CF_SOURCES_SHOWN:]
    ask = (
        f"Candidate decisive error: step {step}. Steps it takes data from: {sources or 'none'}.\n"
        f"If step {step} had been done correctly, would the team have succeeded? Or was the data it used already "
        "wrong in an earlier step? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "fix_here_succeeds": "yes" or "no", "input_was_wrong": "yes" or "no", '
        '"source_step": <earlier step number or null>, "confidence": <0-1>}'
    )

    def build(budget: int):
        shown = sorted({*sources, *range(max(0, step - 2), min(traj.n_steps, step + 3))})
        text, report = _log(traj, shown, budget - 300, focus={step})
        return messages(SYSTEM, f"{header}\n\nSteps:\n{text}\n\n{ask}"), report

    source = one_of(ancestors) | None if ancestors else None
    schema = schema_of(contract("CounterfactualReply", reason=text(), fix_here_succeeds=YesNo, input_was_wrong=YesNo,
                                source_step=source, confidence=unit()))
    meta = {"attr_step": step, "attr_sources": sources, "attr_ancestors": ancestors}
    reply = await ledger.ask("counterfactual", build, meta=meta, schema=schema)
    obj = ledger.parse("counterfactual", reply) or {}
    src = resolve_step(traj, obj.get("source_step"))
    return {
        "step": step,
        "fix_here_succeeds": yes(obj.get("fix_here_succeeds")),
        "input_was_wrong": yes(obj.get("input_was_wrong")),
        "source_step": src if src in ancestors else None,
        "confidence": parse_confidence(obj.get("confidence"), None),
    }


# ------------------------------------------------------------------ screening


def screen_candidates(traj: Trajectory, graph: CausalGraph, candidates: list[int]) -> tuple[list[int], list[dict[str, Any]]]:
    """Deviation-aware pruning, then planning-control for loops; returns the screened order and a log."""
    log: list[dict[str, Any]] = []
    kept = []
    for c in candidates:
        fix = self_corrected(traj, c)
        if fix is not None and len(candidates) > 1:
            log.append({"step": c, "rule": "pruned_self_corrected", "by": fix})
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


async def _counterfactual_walk(
    ledger: CaseLedger, traj: Trajectory, header: str, graph: CausalGraph, screened: list[int]
) -> tuple[int, list[dict[str, Any]], str]:
    """Follow corrupted inputs back along data edges to the first corrupted data; returns (step, hops, why it stopped).

    A rejected first candidate (fixing it would not have helped, and its
    input was fine) hands over to the next screened candidate once.
    """
    step, hops, visited = screened[0], [], set()
    while len(hops) < MAX_WALK_CALLS:
        visited.add(step)
        cf = await counterfactual(ledger, traj, header, graph, step)
        hops.append(cf)
        src = cf["source_step"]
        if cf["input_was_wrong"] and src is not None and src not in visited:
            step = src  # data-flow: move to where the corrupted data came from
            continue
        if cf["fix_here_succeeds"] is False and len(hops) == 1 and len(screened) > 1:
            step = screened[1]  # the local counterfactual rejects it: next candidate
            continue
        return step, hops, "no_earlier_corruption"
    ledger.note_fallback("counterfactual", "walk_budget")
    return step, hops, "budget"


def backtrack(subtasks: list[Subtask], verdicts: list[dict[str, Any]], graph: CausalGraph) -> tuple[Subtask, list[int]]:
    """The origin subtask and the walk to it: top-down, in reverse (see the module docstring).

    >>> subs = [Subtask(index=i, name="s", start=i, end=i) for i in range(3)]
    >>> g = CausalGraph(subtasks=subs, otar={}, edges=[{"level": "subtask", "src": 0, "dst": 1, "type": "sequential"},
    ...                                               {"level": "subtask", "src": 1, "dst": 2, "type": "sequential"}])
    >>> sat = lambda *v: [{"subtask": i, "satisfied": x} for i, x in enumerate(v)]
    >>> [(o.index, path) for o, path in [backtrack(subs, sat(False, True, False), g), backtrack(subs, sat(True, False, False), g)]]
    [(2, [2]), (1, [2, 1])]
    """
    failed = {v["subtask"] for v in verdicts if v["satisfied"] is False}
    start = next((sub for sub in reversed(subtasks) if sub.index in failed), None)
    if start is None:
        return subtasks[-1], []
    cur, path = start, [start.index]
    while True:
        parent = next((p for p in reversed(graph.subtask_parents(cur.index)) if p in failed and p not in path), None)
        if parent is None:
            return cur, path
        cur = subtasks[parent]
        path.append(parent)


async def _chief(traj: Trajectory, ctx: MethodContext, graph_mode: str, n_exemplars: int) -> Prediction:
    ledger = new_ledger(ctx, "chief")
    header = case_header(traj, ctx.with_ground_truth)
    exemplars = retrieve(traj, n_exemplars)
    subtasks, how = await decompose(ledger, traj, header, exemplars)
    if graph_mode == "model":
        graph, graph_source = await model_graph(ledger, traj, header, subtasks)
    else:
        graph, graph_source = build_graph(traj, subtasks), "regex"
    verdicts = await oracles(ledger, traj, SYSTEM, header, subtasks)
    failed, walk = backtrack(subtasks, verdicts, graph)
    if not walk:
        # No subtask admitted failure: the last one did not deliver the right answer.
        ledger.note_fallback("oracle", "no_failed_subtask_last")
    verdict = verdicts[failed.index]
    agent, agent_how = await pick_agent(ledger, traj, header, graph, failed, verdict)
    candidates = await pick_steps(ledger, traj, header, failed, agent)
    screened, screen_log = screen_candidates(traj, graph, candidates)
    step, hops, stop = await _counterfactual_walk(ledger, traj, header, graph, screened)
    agent = display_agent(traj.steps[step].agent)  # data-flow hops may leave the agent picked above
    details = {
        "exemplars": [{"id": ex["id"], "similarity": round(sim, 4)} for ex, sim in exemplars],
        "decomposition": how,
        "subtasks": [{"name": s.name, "start": s.start, "end": s.end} for s in subtasks],
        "graph_source": graph_source,
        "otar": {f"{sub}:{agent_key}": t for (sub, agent_key), t in graph.otar.items()},
        "oracles": verdicts,
        "backtrack": walk,
        "failed_subtask": failed.index,
        "agent_choice": agent_how,
        "candidates": candidates,
        "screening": screen_log,
        "counterfactuals": hops,
        "walk_stop": stop,
        "edges": dict(Counter(f"{e['level']}:{e['type']}" for e in graph.edges)),
    }
    return finish(ledger, traj, agent, step, _confidence(hops), details)


def _confidence(hops: list[dict[str, Any]]) -> float:
    """The last counterfactual's stated confidence, else 0.7 when it says fixing the step succeeds, 0.4 otherwise."""
    last = hops[-1] if hops else {}
    if last.get("confidence") is not None:
        return float(last["confidence"])
    return 0.7 if last.get("fix_here_succeeds") is True else 0.4


@register_method("chief")
def chief(graph: str = "model", exemplars: int = 2) -> Method:
    """CHIEF (see the module docstring). ``graph``: ``model`` (default; the regex graph when the model's is
    unusable) or ``regex``; ``exemplars``: decompositions retrieved as few-shot (0 for none)."""
    if graph not in ("model", "regex"):
        raise ValueError(f"chief: graph must be 'model' or 'regex', got {graph!r}")
    if exemplars < 0:
        raise ValueError(f"chief: exemplars must be >= 0, got {exemplars}")

    async def run(traj: Trajectory, ctx: MethodContext) -> Prediction:
        return await _chief(traj, ctx, graph, exemplars)

    run.settings = {"graph": graph, "exemplars": exemplars, "backtrack": "reverse"}  # type: ignore[attr-defined]
    run.is_training_record = is_pool_record  # type: ignore[attr-defined]
    return run
