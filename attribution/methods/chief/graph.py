"""CHIEF's hierarchical causal graph: its structure, the regex extraction (the fallback) and the helpers.

The model builds the graph (:mod:`attribution.methods.chief.model_graph`); this module holds
the graph itself, the structure every graph shares (handoffs, subtask
edges: :func:`assemble_graph`) and the regex graph (:func:`build_graph`), used
when the model's graph is unusable or with ``chief(graph="regex")``.

- Subtasks: contiguous step ranges covering every step exactly once
  (:func:`repair_subtasks` turns whatever the model proposed into such a
  cover; :func:`fallback_subtasks` makes one when it proposed nothing usable).
- Per subtask and agent an Observation-Thought-Action-Result tuple
  (:func:`otar`), extracted by regular expressions from the steps.
- Typed edges: subtask ``sequential``/``data``; agent ``handoff``; step
  ``data`` (a value first written in one step reused in a later one) and
  ``control`` (a step repeating an earlier step of the same agent: a loop).
- A counterfactual pattern on every step edge (``pattern``): ``propagates``
  (an error in the earlier step would have reached the later one),
  ``corrects`` (the later step checked or fixed the earlier one's output, so
  an error there would have been caught) or ``repeats`` (a control edge). The
  data-flow walk follows ``propagates`` edges only (:meth:`CausalGraph.data_ancestors`),
  and screening prunes a candidate a later step corrected
  (:func:`corrected_downstream`). The regex graph reads ``corrects`` from a
  correction cue in the later step (:data:`CORRECTION_RE`).
- Deviation-aware pruning helpers (:func:`self_corrected`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from attribution.methods.echo.context import HANDOFF_RE, key_decisions, summary
from attribution.llm.prompting import ENVIRONMENT_KEYS, ERROR_CUE_RE, clip, display_agent
from attribution.sources.trajectory import Trajectory

MAX_SUBTASKS = 8
PROPAGATES, CORRECTS, REPEATS = "propagates", "corrects", "repeats"
PATTERNS = (PROPAGATES, CORRECTS, REPEATS)
"""Counterfactual patterns of a step edge (see the module docstring)."""
LOOP_SIMILARITY = 0.6
"""Word-set Jaccard similarity above which a step repeats an earlier one (a loop)."""
_VALUE_RE = re.compile(r"\b\d[\d,.]*\d\b|\b\d{2,}\b|\b[\w-]+\.(?:csv|xlsx|json|txt|py|pdf|html?)\b|\"[^\"\n]{3,40}\"")
_CODE_RE = re.compile(r"```(?:\w+)?\s*\n?(.*?)(?:```|$)", re.S)
CORRECTION_RE = re.compile(
    r"\b(apolog\w*|correct(?:ed|ion)|let me fix|my mistake|revis\w*|instead|re-?run|fixed|updated? (?:code|approach))\b", re.I
)


@dataclass(kw_only=True, slots=True)
class Subtask:
    index: int
    name: str
    start: int
    end: int
    """Inclusive last step."""

    @property
    def steps(self) -> range:
        return range(self.start, self.end + 1)


@dataclass(kw_only=True, slots=True)
class CausalGraph:
    subtasks: list[Subtask]
    otar: dict[tuple[int, str], dict[str, str]]
    """(subtask index, agent) -> {observation, thought, action, result}."""
    edges: list[dict[str, Any]] = field(default_factory=list)
    """{"level": subtask|agent|step, "src", "dst", "type"}."""

    def step_sources(self, step: int, kind: str = "data", pattern: str | None = None) -> list[int]:
        """Steps with a ``kind`` edge into ``step`` (of counterfactual ``pattern`` when given), in step order."""
        return sorted({e["src"] for e in self.edges if e["level"] == "step" and e["type"] == kind and e["dst"] == step
                       and (pattern is None or e.get("pattern", PROPAGATES) == pattern)})

    def data_ancestors(self, step: int) -> list[int]:
        """Steps ``step`` takes data from, directly or through intermediate steps (``propagates`` data edges
        followed back: a step that corrected its input does not inherit the input's error)."""
        seen: set[int] = set()
        stack = [step]
        while stack:  # data edges point forward in time, but ``seen`` guards against any cycle anyway
            for src in self.step_sources(stack.pop(), "data", PROPAGATES):
                if src not in seen and src != step:
                    seen.add(src)
                    stack.append(src)
        return sorted(seen)

    def subtask_parents(self, index: int) -> list[int]:
        """Subtasks with an edge (sequential or data) into subtask ``index``, in order."""
        return sorted({e["src"] for e in self.edges if e["level"] == "subtask" and e["dst"] == index})

    def subtask_of(self, step: int) -> Subtask:
        return next(s for s in self.subtasks if s.start <= step <= s.end)


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)) and math.isfinite(v):
        return int(v)
    if isinstance(v, str) and (m := re.search(r"-?\d+", v)):
        return int(m.group())
    return None


def repair_subtasks(raw: Any, n_steps: int, max_subtasks: int = MAX_SUBTASKS) -> list[Subtask]:
    """Contiguous subtasks covering ``0..n_steps-1`` exactly once, from the model's proposal.

    Ranges are clipped to the trajectory, reversed ones swapped, overlaps cut
    (the earlier subtask keeps the shared steps), gaps given to the subtask
    before them (the first subtask is stretched to step 0, the last to the
    final step), and the smallest neighbours merged until at most
    ``max_subtasks`` remain. Returns [] when nothing usable was proposed.

    >>> [(s.start, s.end) for s in repair_subtasks([{"start": 0, "end": 3}, {"start": 2, "end": 5}], 8)]
    [(0, 3), (4, 7)]
    """
    spans: list[tuple[int, int, str]] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        a, b = _as_int(item.get("start")), _as_int(item.get("end", item.get("start")))
        if a is None or b is None or n_steps == 0:
            continue
        a, b = sorted((min(max(a, 0), n_steps - 1), min(max(b, 0), n_steps - 1)))
        spans.append((a, b, str(item.get("name") or item.get("goal") or "")[:80]))
    spans.sort(key=lambda t: (t[0], t[1]))
    cover: list[list[Any]] = []
    cursor = 0
    for a, b, name in spans:
        a = max(a, cursor)
        if a > b:
            continue  # wholly inside an earlier subtask
        if cover and a > cursor:
            cover[-1][1] = a - 1  # gap: the subtask before it owns the steps
        elif not cover:
            a = 0
        cover.append([a, b, name])
        cursor = b + 1
    if not cover:
        return []
    cover[-1][1] = n_steps - 1
    while len(cover) > max_subtasks:
        k = min(range(len(cover) - 1), key=lambda i: cover[i + 1][1] - cover[i][0])
        cover[k] = [cover[k][0], cover[k + 1][1], cover[k][2] or cover[k + 1][2]]
        del cover[k + 1]
    return [Subtask(index=i, name=c[2] or f"subtask {i + 1}", start=c[0], end=c[1]) for i, c in enumerate(cover)]


def fallback_subtasks(traj: Trajectory, size: int = 4) -> list[Subtask]:
    """Equal chunks of about ``size`` steps (at most MAX_SUBTASKS), used when decomposition failed."""
    n = traj.n_steps
    k = max(1, min(MAX_SUBTASKS, math.ceil(n / size)))
    bounds = [round(i * n / k) for i in range(k + 1)]
    raw = [{"start": bounds[i], "end": bounds[i + 1] - 1, "name": f"part {i + 1}"} for i in range(k)]
    return repair_subtasks(raw, n)


def _values(text: str) -> set[str]:
    return {m.group().strip('"').lower() for m in _VALUE_RE.finditer(text or "")}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{3,}", (text or "").lower()))


def _action(text: str) -> str:
    code = _CODE_RE.search(text or "")
    if code and code.group(1).strip():
        return "code: " + clip(" ".join(code.group(1).split()), 140)
    hand = [s for s in re.split(r"(?<=[.!?])\s+", text or "") if HANDOFF_RE.search(s)]
    return clip(" ".join(hand) or summary(text, 140), 140)


def otar(traj: Trajectory, sub: Subtask, agent_key: str) -> dict[str, str]:
    """Observation-Thought-Action-Result of one agent inside one subtask."""
    mine = [i for i in sub.steps if traj.steps[i].agent_key == agent_key]
    first, last = mine[0], mine[-1]
    before = traj.steps[first - 1].content if first > 0 else traj.query
    after = traj.steps[last + 1].content if last + 1 < traj.n_steps else "(end of log)"
    texts = " ".join(traj.steps[i].content or "" for i in mine)
    return {
        "observation": summary(before, 120),
        "thought": clip(key_decisions(texts, "decision_quality", 160), 160),
        "action": _action(traj.steps[last].content or ""),
        "result": ("[error] " if ERROR_CUE_RE.search(after or "") else "") + summary(after, 120),
    }


def regex_otar(traj: Trajectory, subtasks: list[Subtask]) -> dict[tuple[int, str], dict[str, str]]:
    """OTAR tuples of every (subtask, speaker) pair, extracted by regular expressions."""
    return {(sub.index, key): otar(traj, sub, key)
            for sub in subtasks for key in dict.fromkeys(traj.steps[i].agent_key for i in sub.steps)}


def regex_step_edges(traj: Trajectory) -> list[dict[str, Any]]:
    """Step ``data`` edges (a value first written in one step reused later) and ``control`` edges (a step
    repeating an earlier step of the same agent), found by regular expressions."""
    edges: list[dict[str, Any]] = []
    first_seen: dict[str, int] = {}
    words = [_words(s.content) for s in traj.steps]
    for s in traj.steps:
        pattern = CORRECTS if CORRECTION_RE.search(s.content or "") else PROPAGATES
        for v in sorted(_values(s.content)):
            src = first_seen.setdefault(v, s.index)
            if src != s.index:
                edges.append({"level": "step", "src": src, "dst": s.index, "type": "data", "pattern": pattern})
        for j in range(s.index - 1, -1, -1):
            prev = traj.steps[j]
            if prev.agent_key == s.agent_key and words[j] and words[s.index]:
                sim = len(words[j] & words[s.index]) / len(words[j] | words[s.index])
                if sim >= LOOP_SIMILARITY:
                    edges.append({"level": "step", "src": j, "dst": s.index, "type": "control", "pattern": REPEATS})
                    break
    return edges


def assemble_graph(traj: Trajectory, subtasks: list[Subtask], otar_by_pair: dict[tuple[int, str], dict[str, str]],
                   step_edges: list[dict[str, Any]]) -> CausalGraph:
    """A causal graph from OTAR tuples and step edges (however found), plus the structural edges: agent
    ``handoff`` (the speaker changes), subtask ``sequential`` and subtask ``data`` (a step data edge that
    crosses subtasks)."""
    graph = CausalGraph(subtasks=subtasks, otar=dict(otar_by_pair), edges=list(step_edges))
    for s in traj.steps[1:]:
        if traj.steps[s.index - 1].agent_key != s.agent_key:
            graph.edges.append({"level": "agent", "src": traj.steps[s.index - 1].agent_key, "dst": s.agent_key,
                                "type": "handoff", "step": s.index})
    graph.edges = _dedupe(graph.edges)
    for a, b in zip(subtasks, subtasks[1:]):
        graph.edges.append({"level": "subtask", "src": a.index, "dst": b.index, "type": "sequential"})
    for e in [e for e in graph.edges if e["level"] == "step" and e["type"] == "data"]:
        sa, sb = graph.subtask_of(e["src"]).index, graph.subtask_of(e["dst"]).index
        if sa != sb:
            graph.edges.append({"level": "subtask", "src": sa, "dst": sb, "type": "data"})
    graph.edges = _dedupe(graph.edges)
    return graph


def build_graph(traj: Trajectory, subtasks: list[Subtask]) -> CausalGraph:
    """The regex graph: OTAR tuples and typed subtask/agent/step edges (see the module docstring); CHIEF's
    fallback when the model's graph is unusable, and its ``graph="regex"`` option."""
    return assemble_graph(traj, subtasks, regex_otar(traj, subtasks), regex_step_edges(traj))


def _dedupe(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for e in edges:
        key = (e["level"], e["src"], e["dst"], e["type"])
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def loop_start(graph: CausalGraph, step: int) -> int:
    """Earliest step of the repetition chain ``step`` belongs to (itself when not in a loop)."""
    cur = step
    for _ in range(64):
        srcs = graph.step_sources(cur, "control")
        if not srcs:
            return cur
        cur = srcs[0]
    return cur


def corrected_downstream(graph: CausalGraph, step: int) -> int | None:
    """The first later step whose ``corrects`` data edge leaves ``step`` (it caught ``step``'s output), or None."""
    later = sorted(e["dst"] for e in graph.edges
                   if e["level"] == "step" and e["type"] == "data" and e["src"] == step and e.get("pattern") == CORRECTS)
    return later[0] if later else None


def self_corrected(traj: Trajectory, step: int, horizon: int = 6) -> int | None:
    """A later step of the same agent that corrects ``step`` and is not itself followed by an error.

    Returns that step's index, or None when the error was never corrected.
    """
    agent = traj.steps[step].agent_key
    for j in range(step + 1, min(traj.n_steps, step + 1 + horizon)):
        s = traj.steps[j]
        if s.agent_key != agent or not CORRECTION_RE.search(s.content or ""):
            continue
        nxt = traj.steps[j + 1].content if j + 1 < traj.n_steps else ""
        if not ERROR_CUE_RE.search(nxt or ""):
            return j
    return None


def actors(traj: Trajectory, sub: Subtask) -> list[str]:
    """Display names of the non-human agents speaking in ``sub`` (all speakers when none)."""
    keys = list(dict.fromkeys(traj.steps[i].agent_key for i in sub.steps))
    real = [k for k in keys if k not in ENVIRONMENT_KEYS] or keys
    first = {traj.steps[i].agent_key: display_agent(traj.steps[i].agent) for i in reversed(sub.steps)}
    return [first[k] for k in real]


__all__ = [
    "CausalGraph",
    "Subtask",
    "actors",
    "assemble_graph",
    "build_graph",
    "corrected_downstream",
    "fallback_subtasks",
    "loop_start",
    "regex_otar",
    "regex_step_edges",
    "repair_subtasks",
    "self_corrected",
]
