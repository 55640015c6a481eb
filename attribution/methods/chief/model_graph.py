"""CHIEF's causal graph in the project variant, by the model: OTAR tuples per agent and subtask, edges between steps.

The paper variant builds its graph by Appendix B's and C's calls (:mod:`attribution.methods.chief.hcg`).

One call (``attribution.chief.graph``) per batch of consecutive subtasks:
the prompt shows the whole fitted log (the batch's steps as focus), lists
the batch's (subtask, agent) pairs, and asks for each pair's Observation,
Thought, Action and Result, and for the step edges ending in the batch:
``data`` (a step uses a value or result an earlier step produced) and
``control`` (a step repeats an earlier step, a loop). A batch takes as many
pairs as their tuples fit the reply (NODE_REPLY_TOKENS each, after
EDGE_REPLY_TOKENS for the edges); a subtask with more actors than fit gets a
call of its own and the tuples beyond it from the regex.

Replies are checked: a tuple must name a pair that was asked for, an edge
must point forward in time inside the log and end in the batch. The graph is
the model's when at least one tuple or edge is valid; pairs it left out get
the regex tuple (recorded as fallback ``otar_regex``). A graph with nothing
valid falls back to the regex graph (:func:`attribution.methods.chief.graph.build_graph`),
recorded as fallback ``regex_graph``. Handoff and subtask edges are
structural and added to either graph (:func:`attribution.methods.chief.graph.assemble_graph`).
"""

from __future__ import annotations

from typing import Any

from attribution.llm.calls import CaseLedger
from attribution.methods.chief.graph import (
    CORRECTS,
    PATTERNS,
    PROPAGATES,
    REPEATS,
    CausalGraph,
    Subtask,
    actors,
    assemble_graph,
    build_graph,
    regex_otar,
)
from attribution.llm.prompting import clip, messages, render_steps, resolve_step, step_views
from attribution.llm.replies import contract, many, one_of, schema_of, step_in, text
from attribution.sources.trajectory import Trajectory, normalize_agent

OTAR_FIELDS = ("observation", "thought", "action", "result")
OTAR_CHARS = 50
NODE_REPLY_TOKENS = 70
"""Reply tokens one OTAR tuple takes (four 50-character fields, keys, JSON syntax)."""
MAX_EDGES = 8
EDGE_REPLY_TOKENS = 100
"""Reply tokens kept for up to MAX_EDGES edges."""
GRAPH_FIXED_TOKENS = 420
"""Tokens of a graph prompt's fixed text besides the header (pair listing, instructions)."""


def graph_batches(traj: Trajectory, subtasks: list[Subtask], reply_tokens: int) -> list[list[tuple[Subtask, str]]]:
    """Consecutive (subtask, actor) pairs grouped so that one reply holds all their tuples.

    >>> from attribution.sources.trajectory import Step
    >>> t = Trajectory(id="x", query="q", steps=[Step(index=i, agent=a) for i, a in enumerate("ABAB")])
    >>> subs = [Subtask(index=0, name="s", start=0, end=1), Subtask(index=1, name="t", start=2, end=3)]
    >>> [[(s.index, a) for s, a in b] for b in graph_batches(t, subs, 512)]
    [[(0, 'A'), (0, 'B'), (1, 'A'), (1, 'B')]]
    >>> [len(b) for b in graph_batches(t, subs, 256)]
    [2, 2]
    """
    per_call = max(1, (reply_tokens - EDGE_REPLY_TOKENS) // NODE_REPLY_TOKENS)
    batches: list[list[tuple[Subtask, str]]] = []
    for sub in subtasks:
        pairs = [(sub, name) for name in actors(traj, sub)]
        if batches and len(batches[-1]) + len(pairs) <= per_call:
            batches[-1] += pairs
        else:
            batches.append(pairs[:per_call])  # beyond one reply: the rest get the regex tuple
    return batches


def _ask(pairs: list[tuple[Subtask, str]], lo: int, hi: int) -> str:
    listing = "\n".join(f"- subtask {s.index} '{s.name}' (steps {s.start}-{s.end}): {name}" for s, name in pairs)
    return (
        f"Build the causal graph of steps {lo}-{hi}.\nFor each subtask and agent below, state its Observation (what it "
        "saw), Thought (what it concluded), Action (what it did) and Result (what came of it):\n"
        f"{listing}\nThen list causal edges between steps that end in steps {lo}-{hi}: \"data\" when a step uses a "
        "value or result an earlier step produced, \"control\" when a step repeats an earlier step (a loop); and for "
        "each edge its counterfactual pattern: \"propagates\" when an error in the earlier step would have reached "
        "the later one, \"corrects\" when the later step checked or fixed the earlier one's output, \"repeats\" for "
        "a loop. Reply with JSON only:\n"
        '{"reason": "<one sentence>", "nodes": [{"subtask": <number>, "agent": "<name>", "observation": "<short>", '
        '"thought": "<short>", "action": "<short>", "result": "<short>"}], "edges": [{"src": <earlier step>, '
        '"dst": <later step>, "type": "data" or "control", "pattern": "propagates", "corrects" or "repeats"}]}'
    )


def graph_contract(traj: Trajectory, pairs: list[tuple[Subtask, str]], lo: int, hi: int) -> Any:
    """Reply contract of one graph call (the pairs asked for, edges ending in ``lo..hi``)."""
    node = contract("OtarNode", subtask=one_of(sorted({s.index for s, _ in pairs})),
                    agent=one_of(list(dict.fromkeys(name for _, name in pairs))),
                    **{f: text(OTAR_CHARS) for f in OTAR_FIELDS})
    edge = contract("GraphEdge", src=step_in(0, max(0, hi - 1)), dst=step_in(lo, hi), type=one_of(["data", "control"]),
                    pattern=one_of(list(PATTERNS)))
    return contract("GraphReply", reason=text(), nodes=many(node, len(pairs), 1), edges=many(edge, MAX_EDGES))


def _nodes(traj: Trajectory, obj: dict[str, Any], pairs: list[tuple[Subtask, str]]) -> dict[tuple[int, str], dict[str, str]]:
    wanted = {(s.index, normalize_agent(name)) for s, name in pairs}
    out: dict[tuple[int, str], dict[str, str]] = {}
    for item in obj.get("nodes") if isinstance(obj.get("nodes"), list) else []:
        if not isinstance(item, dict):
            continue
        sub = resolve_step(traj, item.get("subtask"))  # a small integer, read like a step number
        key = (sub, normalize_agent(str(item.get("agent", ""))))
        fields = {f: clip(str(item.get(f) or ""), 200) for f in OTAR_FIELDS}
        if key in wanted and key not in out and any(fields.values()):
            out[key] = fields
    return out


def _edges(traj: Trajectory, obj: dict[str, Any], lo: int, hi: int) -> list[dict[str, Any]]:
    out = []
    for item in obj.get("edges") if isinstance(obj.get("edges"), list) else []:
        if not isinstance(item, dict) or item.get("type") not in ("data", "control"):
            continue
        src, dst = resolve_step(traj, item.get("src")), resolve_step(traj, item.get("dst"))
        if src is not None and dst is not None and src < dst and lo <= dst <= hi:
            pattern = item.get("pattern")
            if item["type"] == "control":
                pattern = REPEATS
            elif pattern not in (PROPAGATES, CORRECTS):
                pattern = PROPAGATES  # a data edge without a usable pattern passes its data on
            out.append({"level": "step", "src": src, "dst": dst, "type": item["type"], "pattern": pattern})
    return out


async def model_graph(ledger: CaseLedger, traj: Trajectory, header: str, subtasks: list[Subtask]) -> tuple[CausalGraph, str]:
    """The causal graph by the model (see the module docstring), and its source: ``model`` or ``regex``."""
    nodes: dict[tuple[int, str], dict[str, str]] = {}
    edges: list[dict[str, Any]] = []
    for pairs in graph_batches(traj, subtasks, ledger.reply_tokens):
        if not pairs:
            continue
        lo, hi = min(s.start for s, _ in pairs), max(s.end for s, _ in pairs)
        ask = _ask(pairs, lo, hi)

        def build(budget: int, ask: str = ask, lo: int = lo, hi: int = hi):
            focus = set(range(lo, hi + 1))
            log, report = render_steps(step_views(traj, focus=focus), budget - GRAPH_FIXED_TOKENS, focus=focus)
            return messages(SYSTEM, f"{header}\n\nLog:\n{log}\n\n{ask}"), report

        hints = {"attr_pairs": [[s.index, name] for s, name in pairs], "attr_range": [lo, hi]}
        reply = await ledger.ask("graph", build, hints=hints, schema=schema_of(graph_contract(traj, pairs, lo, hi)))
        obj = ledger.parse("graph", reply) or {}
        nodes |= _nodes(traj, obj, pairs)
        edges += _edges(traj, obj, lo, hi)
    if not nodes and not edges:
        ledger.note_fallback("graph", "regex_graph")
        return build_graph(traj, subtasks), "regex"
    regex = regex_otar(traj, subtasks)
    missing = [k for k in regex if k not in nodes]
    if any(k[1] in {normalize_agent(a) for a in actors(traj, subtasks[k[0]])} for k in missing):
        ledger.note_fallback("graph", "otar_regex")
    return assemble_graph(traj, subtasks, {**regex, **nodes}, edges), "model"


SYSTEM = (
    "You analyse the log of a multi-agent team that failed its task, to find the decisive error: the earliest "
    "step whose mistake caused the failure. Be brief. Answer in JSON only."
)
