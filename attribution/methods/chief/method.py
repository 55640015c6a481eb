"""CHIEF: hierarchical causal graph, virtual oracles, top-down backtracking, counterfactual attribution.

After CHIEF's paper (Wang, Wu, Wang, Wang, "From Flat Logs to Causal Graphs:
Hierarchical Failure Attribution for LLM-based Multi-Agent Systems", arXiv
2602.23701): its sections 4.1-4.3 and Appendices A-F. Two variants
(``variant``):

``paper`` (the default; :mod:`attribution.methods.chief.hcg`, :mod:`attribution.methods.chief.paper`): the
appendices' pipeline, one prompt per stage, each with the problem, the
correct answer (with ground truth), the whole conversation and its step
count: A decomposition with the two most similar reference exemplars and
self-reflection in the same call; B OTAR tuples per subtask and agent; C
subtask and agent edges with Bias => Anomaly counterfactual patterns, and
step (data-flow) edges; D virtual oracles in subtask order from the problem,
the history and the later steps, the exemplars and the earlier oracles; E
hierarchical backtracking on the graph to candidate subtasks, agents and
steps; F counterfactual attribution over the candidates (local,
planning-control, data-flow, final screening) to one agent and step. Seven
calls on a short log.

``project``: the project's own pipeline, kept by name so the two can be
compared on the same records (model calls in brackets):

1. [1] decompose the log into subtasks, with the ``exemplars`` (default 2)
   most similar decompositions as few-shot (logs and subtask ranges);
2. [1, ``reflect=True``] reflection in a call of its own, the deterministic
   repair (:func:`attribution.methods.chief.graph.repair_subtasks`) its fallback;
3. [1 per batch of subtasks, usually 1] the causal graph by the model: OTAR
   tuples per agent and subtask, step ``data``/``control`` edges, each with
   one of the project's patterns (``propagates``, ``corrects``, ``repeats``;
   :mod:`attribution.methods.chief.model_graph`), plus structural handoff and subtask edges;
   the regex graph (:func:`attribution.methods.chief.graph.build_graph`) when the model's is
   unusable, or always with ``graph="regex"``;
4. [1 to #subtasks, twice] a virtual oracle per subtask written from the task
   and the decomposition alone (no step text: CHIEF D's inputs include the
   history and the later steps), then judged in calls of their own against
   the subtasks' steps (:mod:`attribution.methods.chief.oracle`);
5. a deterministic search instead of E's and F's single calls: candidate sets
   per level (:mod:`attribution.methods.chief.levels`, :func:`locate`; [≤ 1] an agent call and
   [≤ 1] a step call per candidate), screening by rules (deviation-aware
   pruning, loops to their first step, the planner-vs-executor rule) and [1 per
   visited step] a local + data-flow counterfactual walk
   (:mod:`attribution.methods.chief.counterfactual`), LEVEL_WIDTH = 2 per level, MAX_WALK_CALLS
   counterfactual calls per case.

   Model calls per case: at most 2 + G + 2 * #subtasks + 2 * LEVEL_WIDTH +
   LEVEL_WIDTH ** 2 + MAX_WALK_CALLS, G the graph calls; typically 7-10.

In both, re-sends after a length refusal or a transient failure are counted,
and ``attribute`` leaves the exemplar pool's own records out of an evaluation
(``run.is_training_record``). The pool is 11 Who&When records decomposed by
hand (:mod:`attribution.methods.chief.exemplars`), where CHIEF A's knowledge base holds 165 GAIA
and 33 AssistantBench solutions retrieved by embeddings: neither data set nor
an embedding model is shipped here.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from attribution.methods.chief.counterfactual import screen_candidates, walk
from attribution.methods.chief.exemplars import is_pool_record, retrieve
from attribution.methods.chief.graph import CausalGraph, Subtask, build_graph, fallback_subtasks, repair_subtasks
from attribution.methods.chief.levels import LEVEL_WIDTH, backtrack, candidate_subtasks, pick_agent, pick_steps
from attribution.methods.chief.model_graph import SYSTEM, model_graph
from attribution.methods.chief.oracle import oracles
from attribution.methods.chief.paper import chief_paper
from attribution.llm.calls import CaseLedger, new_ledger
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.llm.prompting import (
    case_header,
    display_agent,
    estimate_tokens,
    finish,
    messages,
    render_steps,
    step_views,
)
from attribution.llm.replies import contract, many, schema_of, step_in, text
from attribution.sources.trajectory import Trajectory

MAX_WALK_CALLS = 8
"""Cost guard on counterfactual calls per case (one per visited step, over every candidate the search tries)."""

__all__ = ["chief"]


def _log(traj: Trajectory, indices: range | list[int], budget: int) -> tuple[str, Any]:
    return render_steps(step_views(traj, list(indices)), budget)


# ------------------------------------------------------------------ decomposition and reflection


def exemplar_text(exemplars: list[tuple[dict[str, Any], float]]) -> str:
    """The retrieved exemplars as the decomposition prompt shows them."""
    parts = []
    for n, (ex, _) in enumerate(exemplars, 1):
        spans = json.dumps(ex["subtasks"], ensure_ascii=False)
        parts.append(f"Example {n} log:\n{ex['log']}\nExample {n} subtasks: {spans}")
    return "\n\n".join(parts)


def _spans_schema(traj: Trajectory, name: str, first: str) -> dict[str, Any]:
    last = traj.n_steps - 1
    span = contract("Span", name=text(40), start=step_in(0, last), end=step_in(0, last))
    return schema_of(contract(name, **{first: text()}, subtasks=many(span, 6, 1)))


SPANS = '{"name": "<short>", "start": <first step>, "end": <last step>}'


async def decompose(ledger: CaseLedger, traj: Trajectory, header: str,
                    exemplars: list[tuple[dict[str, Any], float]]) -> Any:
    """The model's proposed subtasks (``exemplars`` as few-shot), as it replied (None when unusable)."""
    shown = exemplar_text(exemplars)
    ask = (
        "Split the log into 2-6 subtasks of consecutive steps that together cover every step. Reply with JSON only:\n"
        f'{{"reason": "<one sentence>", "subtasks": [{SPANS}]}}'
    )

    def build(budget: int):
        log, report = _log(traj, range(traj.n_steps), budget - 350 - estimate_tokens(shown))
        user = f"{shown}\n\n{header}\n\nLog:\n{log}\n\n{ask}" if shown else f"{header}\n\nLog:\n{log}\n\n{ask}"
        return messages(SYSTEM, user), report

    hints = {"attr_n_steps": traj.n_steps, "attr_exemplars": [ex["id"] for ex, _ in exemplars]}
    reply = await ledger.ask("decompose", build, hints=hints, schema=_spans_schema(traj, "DecomposeReply", "reason"))
    return (ledger.parse("decompose", reply) or {}).get("subtasks")


async def reflect(ledger: CaseLedger, traj: Trajectory, header: str, proposed: Any) -> Any:
    """The model's review of its ``proposed`` subtasks against the log, corrected (None when unusable)."""
    items = [i for i in proposed if isinstance(i, dict)] if isinstance(proposed, list) else []
    listing = "\n".join(f"- '{i.get('name', '')}': steps {i.get('start')}-{i.get('end')}" for i in items) or "(none)"
    ask = (
        f"A first decomposition of this log into subtasks:\n{listing}\n"
        "Check it: the subtasks must be consecutive ranges that cover every step exactly once (no gap, no overlap), "
        "each with one coherent goal. Reply with the corrected subtasks (the same ones when they are right), "
        f'JSON only:\n{{"problems": "<one sentence>", "subtasks": [{SPANS}]}}'
    )

    def build(budget: int):
        log, report = _log(traj, range(traj.n_steps), budget - 350 - estimate_tokens(listing))
        return messages(SYSTEM, f"{header}\n\nLog:\n{log}\n\n{ask}"), report

    hints = {"attr_n_steps": traj.n_steps, "attr_proposed": [[i.get("start"), i.get("end")] for i in items]}
    reply = await ledger.ask("reflect", build, hints=hints, schema=_spans_schema(traj, "ReflectReply", "problems"))
    return (ledger.parse("reflect", reply) or {}).get("subtasks")


async def subtasks_of(ledger: CaseLedger, traj: Trajectory, header: str, exemplars: list[tuple[dict[str, Any], float]],
                      reflection: bool) -> tuple[list[Subtask], str]:
    """Subtasks and their source: ``reflected``, ``model`` (the proposal repaired), or ``equal_chunks``."""
    proposed = await decompose(ledger, traj, header, exemplars)
    if reflection:
        subs = repair_subtasks(await reflect(ledger, traj, header, proposed), traj.n_steps)
        if subs:
            return subs, "reflected"
        ledger.note_fallback("reflect", "repair")
    subs = repair_subtasks(proposed, traj.n_steps)
    if subs:
        return subs, "model"
    ledger.note_fallback("decompose", "equal_chunks")
    return fallback_subtasks(traj), "equal_chunks"


# ------------------------------------------------------------------ the search


async def locate(ledger: CaseLedger, traj: Trajectory, header: str, graph: CausalGraph, subtasks: list[Subtask],
                 verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Backtracking over the candidate sets of each level (see the module docstring); the outcome and its log."""
    visited: set[int] = set()
    tried: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    for sub_index in candidate_subtasks(subtasks, verdicts, graph)[:LEVEL_WIDTH]:
        sub = subtasks[sub_index]
        agents, agent_how = await pick_agent(ledger, traj, header, graph, sub, verdicts[sub_index])
        for agent in agents[:LEVEL_WIDTH]:
            candidates = await pick_steps(ledger, traj, header, sub, agent)
            screened, screen_log = screen_candidates(traj, graph, candidates)
            for start in [c for c in screened if c not in visited][:LEVEL_WIDTH]:
                budget = MAX_WALK_CALLS - sum(len(t["hops"]) for t in tried)
                step, hops, stop = await walk(ledger, traj, header, graph, start, budget, visited)
                tried.append({"subtask": sub_index, "agent": agent, "agent_choice": agent_how, "candidates": candidates,
                              "screening": screen_log, "start": start, "step": step, "hops": hops, "stop": stop})
                first = first or tried[-1]
                if stop == "budget":
                    ledger.note_fallback("counterfactual", "walk_budget")
                if stop != "rejected" or sum(len(t["hops"]) for t in tried) >= MAX_WALK_CALLS:
                    return {**tried[-1], "tried": tried}
    if first is None:  # no candidate left to try (cannot happen with a non-empty subtask)
        sub = subtasks[-1]
        return {"subtask": sub.index, "agent": None, "agent_choice": "none", "candidates": [], "screening": [],
                "start": sub.end, "step": sub.end, "hops": [], "stop": "no_candidate", "tried": []}
    return {**first, "stop": "all_rejected", "tried": tried}


async def _chief(traj: Trajectory, ctx: MethodContext, graph_mode: str, n_exemplars: int, reflection: bool) -> Prediction:
    ledger = new_ledger(ctx, "chief")
    header = case_header(traj, ctx.with_ground_truth)
    exemplars = retrieve(traj, n_exemplars)
    subtasks, how = await subtasks_of(ledger, traj, header, exemplars, reflection)
    if graph_mode == "model":
        graph, graph_source = await model_graph(ledger, traj, header, subtasks)
    else:
        graph, graph_source = build_graph(traj, subtasks), "regex"
    verdicts = await oracles(ledger, traj, SYSTEM, header, subtasks)
    origin, path = backtrack(subtasks, verdicts, graph)
    if not path:
        # No subtask admitted failure: the last one did not deliver the right answer.
        ledger.note_fallback("oracle", "no_failed_subtask_last")
    found = await locate(ledger, traj, header, graph, subtasks, verdicts)
    step = found["step"]
    agent = display_agent(traj.steps[step].agent)  # data-flow and planner hops may leave the agent picked
    details = {
        "variant": "project",
        "exemplars": [{"id": ex["id"], "similarity": round(sim, 4)} for ex, sim in exemplars],
        "decomposition": how,
        "subtasks": [{"name": s.name, "start": s.start, "end": s.end} for s in subtasks],
        "graph_source": graph_source,
        "otar": {f"{sub}:{agent_key}": t for (sub, agent_key), t in graph.otar.items()},
        "oracles": verdicts,
        "backtrack": path,
        "failed_subtask": origin.index,
        "candidate_subtasks": candidate_subtasks(subtasks, verdicts, graph),
        "agent_choice": found["agent_choice"],
        "candidates": found["candidates"],
        "screening": found["screening"],
        "counterfactuals": found["hops"],
        "walk_stop": found["stop"],
        "search": [{k: t[k] for k in ("subtask", "agent", "start", "step", "stop")} for t in found["tried"]],
        "edges": dict(Counter(f"{e['level']}:{e['type']}" for e in graph.edges)),
        "edge_patterns": dict(Counter(e["pattern"] for e in graph.edges if "pattern" in e)),
    }
    return finish(ledger, traj, agent, step, _confidence(found["hops"]), details)


def _confidence(hops: list[dict[str, Any]]) -> float:
    """The last counterfactual's stated confidence, else 0.7 when it says fixing the step succeeds, 0.4 otherwise."""
    last = hops[-1] if hops else {}
    if last.get("confidence") is not None:
        return float(last["confidence"])
    return 0.7 if last.get("fix_here_succeeds") is True else 0.4


VARIANTS = ("paper", "project")


@register_method("chief")
def chief(variant: str = "paper", exemplars: int = 2, graph: str | None = None, reflect: bool | None = None) -> Method:
    """CHIEF (see the module docstring). ``variant``: ``paper`` (default) or ``project``; ``exemplars``: the
    decompositions retrieved as examples (0 for none). Project variant only: ``graph``, ``model`` (its default;
    the regex graph when the model's is unusable) or ``regex``; ``reflect``, the reflection call (default true;
    false: the deterministic repair alone, one call fewer)."""
    if variant not in VARIANTS:
        raise ValueError(f"chief: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if graph is not None and graph not in ("model", "regex"):
        raise ValueError(f"chief: graph must be 'model' or 'regex', got {graph!r}")
    if exemplars < 0:
        raise ValueError(f"chief: exemplars must be >= 0, got {exemplars}")
    if reflect is not None and not isinstance(reflect, bool):
        raise ValueError(f"chief: reflect must be true or false, got {reflect!r}")
    if variant == "paper" and (graph is not None or reflect is not None):
        raise ValueError("chief: graph and reflect are options of variant=project (the paper variant builds its "
                         "graph by Appendix B and C's calls and reflects inside the decomposition call)")

    if variant == "paper":
        async def run(traj: Trajectory, ctx: MethodContext) -> Prediction:
            return await chief_paper(traj, ctx, exemplars)

        run.settings = {"variant": variant, "exemplars": exemplars}  # type: ignore[attr-defined]
        run.is_training_record = is_pool_record  # type: ignore[attr-defined]
        return run
    graph_mode = graph or "model"
    reflection = True if reflect is None else reflect

    async def run_project(traj: Trajectory, ctx: MethodContext) -> Prediction:
        return await _chief(traj, ctx, graph_mode, exemplars, reflection)

    run_project.settings = {"variant": variant, "graph": graph_mode, "exemplars": exemplars,  # type: ignore[attr-defined]
                            "reflect": reflection, "backtrack": "candidate_sets"}
    run_project.is_training_record = is_pool_record  # type: ignore[attr-defined]
    return run_project
