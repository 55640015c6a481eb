"""CHIEF's hierarchical causal graph as its appendices build it: the paper variant's first stages (CHIEF A, B, C).

Four kinds of model call, each with the problem, the correct answer (only
with ground truth), the whole conversation (fitted to the route's window) and
the number of steps, as every prompt of Appendices A-F carries them:

- A (``attribution.chief.decomposition``, one call): RAG task decomposition.
  The two most similar reference exemplars (:mod:`attribution.methods.chief.exemplars`) are
  shown in GAIA's form, a question and its numbered steps; the model
  decomposes the conversation into semantic subtasks with A's self-reflection
  inside the same call (draft, evidence alignment against the dialogue, final
  ranges continuous, covering every step, not overlapping). The reply is made
  a cover by :func:`attribution.methods.chief.graph.repair_subtasks` (the guard every later stage
  needs; equal chunks when nothing is usable, recorded).
- B (``attribution.chief.otar``): for each subtask, the agents acting within
  its step range and each one's Action, Observation, Thought and Result. One
  call when the reply budget holds every subtask's agents, else consecutive
  batches (:func:`attribution.methods.chief.model_graph.graph_batches`); an agent the replies
  leave out gets the regex tuple (recorded).
- C, subtask and agent edges (``attribution.chief.edges``, one call): edges
  between consecutive subtasks (``data_dependency``, ``logical_prereq``) and
  between agents inside one subtask (``obs_dependency``,
  ``reasoning_continuation``, ``decision_dependency``,
  ``environment_feedback``, ``memory_ref``, ``loop_control``), each with its
  counterfactual patterns: an upstream Bias bound to the downstream Anomaly it
  would cause, written for C's four scenarios (local, planning-control,
  data-flow, deviation-aware).
- C, step edges (``attribution.chief.step_edges``, one call): data passed
  from an upstream step (its output data and type) to a downstream step (its
  input data and type); the agents are read from the log.

Replies are checked against the log (subtasks and agents that exist, edges
between consecutive subtasks or agents of one subtask, step edges forward in
time); the number of edges and patterns per reply is bounded by the reply
budget (:func:`edge_limits`). Loop groups, which Appendix F's prompt reads
from the graph without saying how they are found, are the project's: steps
of one agent repeating an earlier one (:func:`attribution.methods.chief.graph.regex_step_edges`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attribution.llm.calls import CaseLedger
from attribution.llm.prompt_fit import clip, render_steps, step_views
from attribution.llm.prompting import estimate_tokens, messages, resolve_agent, resolve_step
from attribution.llm.replies import contract, many, one_of, schema_of, step_in, text
from attribution.methods.chief.graph import Subtask, actors, fallback_subtasks, loop_start, regex_otar, regex_step_edges
from attribution.methods.chief.graph import CausalGraph, repair_subtasks
from attribution.methods.chief.model_graph import OTAR_CHARS, graph_batches
from attribution.sources.trajectory import Trajectory, normalize_agent

SYSTEM = ("You analyse the conversation of a multi-agent team that tried to solve a real-world problem and failed. "
          "Answer in JSON only.")
SUBTASK_EDGE_TYPES = ("data_dependency", "logical_prereq")
AGENT_EDGE_TYPES = ("obs_dependency", "reasoning_continuation", "decision_dependency", "environment_feedback",
                    "memory_ref", "loop_control")
DATA_TYPES = ("text", "numeric", "list", "boolean")
OTAR_FIELDS = ("action", "observation", "thought", "result")
FIELD_CHARS = 60


def sid(index: int) -> str:
    """A subtask's name in the prompts: S1, S2, ... (as Appendix C writes them)."""
    return f"S{index + 1}"


def parse_sid(value: Any, n: int) -> int | None:
    """``S3``, ``3`` or ``subtask 3`` as a subtask index in ``0..n-1`` (1-based in the prompts), or None."""
    m = re.search(r"\d+", str(value)) if value is not None and not isinstance(value, bool) else None
    return int(m.group()) - 1 if m and 0 < int(m.group()) <= n else None


@dataclass(kw_only=True, slots=True)
class HCG:
    """The hierarchical causal graph of one case (module docstring) and the oracles written for it."""

    subtasks: list[Subtask]
    otar: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    """(subtask index, agent as the log spells it) -> action, observation, thought, result."""
    subtask_edges: list[dict[str, Any]] = field(default_factory=list)
    agent_edges: list[dict[str, Any]] = field(default_factory=list)
    step_edges: list[dict[str, Any]] = field(default_factory=list)
    loops: list[list[int]] = field(default_factory=list)
    oracles: dict[int, dict[str, str]] = field(default_factory=dict)

    def agents_of(self, index: int) -> list[str]:
        return [a for (k, a) in self.otar if k == index]

    def record(self) -> dict[str, Any]:
        return {"subtasks": [{"name": s.name, "start": s.start, "end": s.end} for s in self.subtasks],
                "otar": {f"{sid(k)}:{a}": t for (k, a), t in self.otar.items()},
                "subtask_edges": self.subtask_edges, "agent_edges": self.agent_edges, "step_edges": self.step_edges,
                "loops": self.loops, "oracles": {sid(k): o for k, o in self.oracles.items()}}


def conversation(traj: Trajectory, budget: int, focus: set[int] | None = None) -> tuple[str, Any]:
    """The whole conversation fitted to ``budget`` tokens, with its step count."""
    log, report = render_steps(step_views(traj, focus=focus), max(16, budget - 20), focus=focus)
    return f"The conversation ({traj.n_steps} steps, numbered 0-{traj.n_steps - 1}; [step] agent: output):\n{log}", report


async def ask(ledger: CaseLedger, stage: str, traj: Trajectory, header: str, task: str, schema: dict[str, Any],
              hints: dict[str, Any], before: str | Callable[[int], str] = "", focus: set[int] | None = None) -> str:
    """One call: the header, ``before`` (exemplars, a listing, a graph; a callable gets the prompt's budget in
    tokens), the fitted conversation, ``task``; the reply text."""
    def build(budget: int):
        shown = before(budget) if callable(before) else before
        fixed = estimate_tokens(SYSTEM + header + shown + task)
        log, report = conversation(traj, budget - fixed, focus)
        parts = [header, shown, log, task] if shown else [header, log, task]
        return messages(SYSTEM, "\n\n".join(parts)), report

    return await ledger.ask(stage, build, hints=hints, schema=schema)


def listing(subtasks: list[Subtask]) -> str:
    return "\n".join(f"{sid(s.index)} '{s.name}': steps {s.start}-{s.end}" for s in subtasks)


# ---- A: RAG-based task decomposition ----


def exemplars_text(exemplars: list[tuple[dict[str, Any], float]]) -> str:
    """The retrieved exemplars in GAIA's form (a question, then its numbered steps)."""
    parts = []
    for n, (ex, _) in enumerate(exemplars, 1):
        steps = " ".join(f"{i}. {s['name']}." for i, s in enumerate(ex["subtasks"], 1))
        parts.append(f"[Reference example {n}]\nQuestion: {clip(' '.join(ex['question'].split()), 400)}\nSteps: {steps}")
    return "\n".join(parts)


async def decompose(ledger: CaseLedger, traj: Trajectory, header: str, rag: str) -> tuple[list[Subtask], str]:
    """A: the subtasks (a cover of the steps) and their source, ``model`` or ``equal_chunks``."""
    last = max(0, traj.n_steps - 1)
    span = contract("SubtaskSpan", name=text(40), start=step_in(0, last), end=step_in(0, last))
    schema = schema_of(contract("DecompositionReply", reflection=text(160), subtasks=many(span, 6, 1)))
    task = (
        "Based on this conversation and the reference examples, decompose the team's reasoning into semantic "
        "subtasks, each a range of consecutive steps. Reflect on your decomposition before you answer:\n"
        "1. Draft: propose an initial set of subtasks.\n"
        "2. Evidence alignment: check that each subtask's step range matches what the dialogue does there.\n"
        "3. Final: make the step ranges continuous, covering every step, with no overlap.\n"
        'Reply with JSON only: {"reflection": "<what the alignment check changed>", "subtasks": '
        '[{"name": "<short>", "start": <first step>, "end": <last step>}]}'
    )
    before = f"Retrieved reference examples:\n{rag}" if rag else ""
    reply = await ask(ledger, "decomposition", traj, header, task, schema, {"attr_n_steps": traj.n_steps}, before)
    subs = repair_subtasks((ledger.parse("decomposition", reply) or {}).get("subtasks"), traj.n_steps)
    if subs:
        return subs, "model"
    ledger.note_fallback("decomposition", "equal_chunks")
    return fallback_subtasks(traj), "equal_chunks"


# ---- B: OTAR parsing ----


async def parse_otar(ledger: CaseLedger, traj: Trajectory, header: str, graph: HCG) -> None:
    """B: every subtask's acting agents and their OTAR tuples, into ``graph.otar``."""
    subs = graph.subtasks
    for pairs in graph_batches(traj, subs, ledger.reply_tokens):
        batch = list(dict.fromkeys(s.index for s, _ in pairs))
        names = list(dict.fromkeys(name for _, name in pairs))
        # OTAR_CHARS per field: graph_batches sizes a batch for tuples of that length.
        agent = contract("OtarAgent", agent=one_of(names), **{f: text(OTAR_CHARS) for f in OTAR_FIELDS})
        item = contract("OtarSubtask", subtask=one_of([sid(k) for k in batch]), agents=many(agent, len(names), 1))
        schema = schema_of(contract("OtarReply", subtasks=many(item, len(batch), 1)))
        task = (
            f"The subtasks:\n{listing([subs[k] for k in batch])}\n"
            "For each subtask, identify the agents that actively perform actions within its step range, and "
            "summarise each one's behaviour: Action (what it did), Observation (what it saw), Thought (its "
            "reasoning), Result (its output). Use the subtask names exactly as given. Reply with JSON only: "
            '{"subtasks": [{"subtask": "S1", "agents": [{"agent": "<name>", "action": "<short>", "observation": '
            '"<short>", "thought": "<short>", "result": "<short>"}]}]}'
        )
        focus = {i for k in batch for i in subs[k].steps}
        hints = {"attr_pairs": [[s.index, name] for s, name in pairs], "attr_subtasks": [sid(k) for k in batch]}
        reply = await ask(ledger, "otar", traj, header, task, schema, hints, focus=focus)
        obj = ledger.parse("otar", reply) or {}
        items = obj.get("subtasks") if isinstance(obj.get("subtasks"), list) else []
        for it in [i for i in items if isinstance(i, dict)]:
            k = parse_sid(it.get("subtask"), len(subs))
            agents = it.get("agents") if isinstance(it.get("agents"), list) else []
            for a in [a for a in agents if isinstance(a, dict)] if k in batch else []:
                name = resolve_agent(traj, a.get("agent"))
                fields = {f: clip(str(a.get(f) or ""), 200) for f in OTAR_FIELDS}
                if name and (k, name) not in graph.otar and any(fields.values()):
                    graph.otar[(k, name)] = fields
    regex = regex_otar(traj, subs)
    missing = 0
    for sub in subs:
        for name in actors(traj, sub):
            if not any(k == sub.index and normalize_agent(a) == normalize_agent(name) for k, a in graph.otar):
                t = regex[(sub.index, normalize_agent(name))]
                graph.otar[(sub.index, name)] = {f: t[f] for f in OTAR_FIELDS}
                missing += 1
    if missing:
        ledger.note_fallback("otar", f"regex_tuples_{missing}")


# ---- C: edges ----


def edge_limits(reply_tokens: int) -> tuple[int, int]:
    """(edges, patterns per edge) one reply holds: about 35 tokens an edge and 35 a pattern.

    >>> edge_limits(512), edge_limits(1024), edge_limits(256)
    ((6, 1), (8, 2), (3, 1))
    """
    patterns = 2 if reply_tokens >= 900 else 1
    return max(2, min(8, (reply_tokens - 40) // (35 + 35 * patterns))), patterns


async def build_edges(ledger: CaseLedger, traj: Trajectory, header: str, graph: HCG) -> None:
    """C, first prompt: subtask edges (consecutive pairs) and agent edges (inside a subtask), with patterns."""
    subs = graph.subtasks
    names = list(dict.fromkeys(a for (_, a) in graph.otar))
    n_edges, n_patterns = edge_limits(ledger.reply_tokens)
    pattern = contract("Pattern", bias=text(FIELD_CHARS), anomaly=text(FIELD_CHARS))
    ends = [sid(s.index) for s in subs] + names
    edge = contract("CausalEdge", **{"from": one_of(ends), "to": one_of(ends)},
                    subtask=one_of([sid(s.index) for s in subs]) | None,
                    type=one_of(list(SUBTASK_EDGE_TYPES + AGENT_EDGE_TYPES)),
                    counterfactual_patterns=many(pattern, n_patterns))
    schema = schema_of(contract("EdgesReply", edges=many(edge, n_edges)))
    with_agents = "\n".join(f"{sid(s.index)} '{s.name}' (steps {s.start}-{s.end}): agents "
                            f"{', '.join(graph.agents_of(s.index)) or 'none'}" for s in subs)
    task = (
        f"The subtasks with their agents:\n{with_agents}\n"
        "Construct causal edges:\n"
        "1. between consecutive subtasks only (S1->S2, S2->S3, ...), typed data_dependency or logical_prereq;\n"
        "2. inside each subtask, between its own agents only (no edge across subtasks), typed obs_dependency, "
        "reasoning_continuation, decision_dependency, environment_feedback, memory_ref or loop_control, "
        "following how observations, reasoning and decisions flow from one agent to the next.\n"
        "Give each edge zero or more counterfactual patterns binding a possible bias of the upstream node to the "
        "anomaly it would cause downstream (e.g. if the upstream agent's Thought hallucinates, the downstream "
        "agent's Result holds wrong data). Write them for four questions: Local (is an error at this edge its own "
        "or inherited?), Planning-Control (a planner repeating a failed strategy, or an executor failing a valid "
        "one), Data-Flow (where a data item was first corrupted), Deviation-Aware (is the deviation reversible: "
        "do later steps correct it?). List the subtask edges first, then the agent edges by subtask; an agent "
        "edge names its subtask. Reply with JSON only: "
        '{"edges": [{"from": "<S1 or agent>", "to": "<S2 or agent>", "subtask": null or "S1", "type": "<type>", '
        '"counterfactual_patterns": [{"bias": "<upstream bias>", "anomaly": "<downstream anomaly>"}]}]}'
    )
    reply = await ask(ledger, "edges", traj, header, task, schema, {"attr_subtasks": [sid(s.index) for s in subs]})
    obj = ledger.parse("edges", reply) or {}
    for item in [i for i in obj.get("edges", []) if isinstance(i, dict)] if isinstance(obj.get("edges"), list) else []:
        pats = item.get("counterfactual_patterns")
        pats = [{"bias": clip(str(p.get("bias") or ""), 200), "anomaly": clip(str(p.get("anomaly") or ""), 200)}
                for p in (pats if isinstance(pats, list) else []) if isinstance(p, dict)]
        src, dst, kind = item.get("from"), item.get("to"), str(item.get("type") or "")
        a, b = parse_sid(src, len(subs)), parse_sid(dst, len(subs))
        if str(src).strip().upper().startswith("S") and a is not None and b == a + 1 and kind in SUBTASK_EDGE_TYPES:
            graph.subtask_edges.append({"src": a, "dst": b, "type": kind, "patterns": pats})
            continue
        k = parse_sid(item.get("subtask"), len(subs))
        x, y = resolve_agent(traj, src), resolve_agent(traj, dst)
        inside = [normalize_agent(n) for n in graph.agents_of(k)] if k is not None else []
        if x and y and x != y and normalize_agent(x) in inside and normalize_agent(y) in inside \
                and kind in AGENT_EDGE_TYPES:
            graph.agent_edges.append({"subtask": k, "src": x, "dst": y, "type": kind, "patterns": pats})


async def build_step_edges(ledger: CaseLedger, traj: Trajectory, header: str, graph: HCG) -> None:
    """C, second prompt: step edges (data produced upstream, consumed downstream)."""
    last = max(0, traj.n_steps - 1)
    n_edges = max(2, min(8, (ledger.reply_tokens - 40) // 45))
    item = contract("StepEdge", upstream=step_in(0, last), output_data=text(40), output_type=one_of(list(DATA_TYPES)),
                    downstream=step_in(0, last), input_data=text(40), input_type=one_of(list(DATA_TYPES)))
    schema = schema_of(contract("StepEdgesReply", step_edges=many(item, n_edges)))
    task = (
        f"The subtasks:\n{listing(graph.subtasks)}\n"
        "Identify step edges: meaningful data passed from an upstream step (where the data is produced) to a "
        "downstream step (where it is used). For each give the upstream step, a short description of the data it "
        "outputs (e.g. 'distance=30' or 'parsed_goal') and its type (text, numeric, list or boolean), and the "
        "downstream step with the data it takes in and its type. There may be none, one or several. Reply with "
        'JSON only: {"step_edges": [{"upstream": <step>, "output_data": "<short>", "output_type": "<type>", '
        '"downstream": <step>, "input_data": "<short>", "input_type": "<type>"}]}'
    )
    reply = await ask(ledger, "step_edges", traj, header, task, schema, {"attr_n_steps": traj.n_steps})
    obj = ledger.parse("step_edges", reply) or {}
    items = obj.get("step_edges") if isinstance(obj.get("step_edges"), list) else []
    for it in [i for i in items if isinstance(i, dict)]:
        up, down = resolve_step(traj, it.get("upstream")), resolve_step(traj, it.get("downstream"))
        if up is None or down is None or up >= down:
            continue  # data flows forward in time
        graph.step_edges.append({
            "upstream": up, "upstream_agent": traj.steps[up].agent, "output_data": clip(str(it.get("output_data") or ""), 120),
            "output_type": str(it.get("output_type") or ""), "downstream": down,
            "downstream_agent": traj.steps[down].agent, "input_data": clip(str(it.get("input_data") or ""), 120),
            "input_type": str(it.get("input_type") or "")})


def loop_groups(traj: Trajectory, subtasks: list[Subtask]) -> list[list[int]]:
    """Steps of one agent repeating an earlier one, grouped by the loop's first step (2 or more steps each)."""
    rg = CausalGraph(subtasks=subtasks, otar={}, edges=regex_step_edges(traj))
    groups: dict[int, list[int]] = {}
    for s in range(traj.n_steps):
        groups.setdefault(loop_start(rg, s), []).append(s)
    return [g for g in groups.values() if len(g) > 1]


async def build_hcg(ledger: CaseLedger, traj: Trajectory, header: str, rag: str) -> tuple[HCG, str]:
    """A, B and C: the graph (oracles still empty) and how the subtasks were made."""
    subtasks, how = await decompose(ledger, traj, header, rag)
    graph = HCG(subtasks=subtasks)
    await parse_otar(ledger, traj, header, graph)
    await build_edges(ledger, traj, header, graph)
    await build_step_edges(ledger, traj, header, graph)
    graph.loops = loop_groups(traj, subtasks)
    return graph, how


def graph_text(graph: HCG, max_chars: int) -> str:
    """The graph as the backtracking and attribution prompts show it, its free text shortened to fit ``max_chars``."""
    for width in (200, 120, 70, 40, 20):
        text = _graph_text(graph, width)
        if len(text) <= max_chars:
            return text
    return clip(text, max_chars)


def _graph_text(graph: HCG, w: int) -> str:
    def c(value: Any) -> str:
        return clip(" ".join(str(value or "").split()), w)

    out = ["Subtasks (step ranges inclusive), each with its oracle and its agents' observation/thought/action/result:"]
    for s in graph.subtasks:
        out.append(f"{sid(s.index)} '{s.name}': steps {s.start}-{s.end}")
        if o := graph.oracles.get(s.index):
            out.append("  oracle: " + "; ".join(f"{k.replace('_', ' ')}: {c(v)}" for k, v in o.items() if v))
        for (k, a), t in graph.otar.items():
            if k == s.index:
                out.append(f"  - {a}: " + "; ".join(f"{f}: {c(t.get(f))}" for f in OTAR_FIELDS))
    if graph.subtask_edges or graph.agent_edges:
        out.append("Causal edges (counterfactual patterns: upstream bias => downstream anomaly):")
    for e in graph.subtask_edges:
        out.append(f"  {sid(e['src'])} -> {sid(e['dst'])} ({e['type']})" + _patterns(e, c))
    for e in graph.agent_edges:
        out.append(f"  in {sid(e['subtask'])}: {e['src']} -> {e['dst']} ({e['type']})" + _patterns(e, c))
    if graph.step_edges:
        out.append("Step edges (data flow):")
    for e in graph.step_edges:
        out.append(f"  [{e['upstream']}] outputs {c(e['output_data'])} ({e['output_type']}) -> [{e['downstream']}] "
                   f"uses {c(e['input_data'])} ({e['input_type']})")
    for g in graph.loops:
        out.append(f"Loop group: steps {', '.join(map(str, g))} (entry {g[0]}, exit {g[-1]})")
    return "\n".join(out)


def _patterns(edge: dict[str, Any], c: Any) -> str:
    return "".join(f"; {c(p['bias'])} => {c(p['anomaly'])}" for p in edge["patterns"])
