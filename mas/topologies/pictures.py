"""Pictures of each system, drawn offline: who talks to whom, and the control flow.

Per system directory ``<experiment>/<benchmark>/<system>/``:

- ``mas_graph.mmd`` / ``.png``: the agents (and system actors, tools) and
  the messages between them, from the topology's structure and the config;
- ``workflow_graph.mmd`` / ``.png``: the compiled LangGraph graph
  (``get_graph().draw_mermaid()`` for the Mermaid text).

PNGs are drawn with matplotlib (Agg) in a simple layered layout; no web
service is called.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from descriptor.errors import UserError
from descriptor.io import write_bytes_atomic, write_text_atomic
from mas.config import ExperimentConfig
from mas.topologies.agent import RunContext
from mas.topologies.judge import ANSWER_RECIPIENT, JUDGE_ACTOR
from mas.topologies.termination import CONTROLLER

PICTURE_FILES = ("mas_graph.mmd", "mas_graph.png", "workflow_graph.mmd", "workflow_graph.png")


@dataclass(kw_only=True, frozen=True, slots=True)
class Edge:
    source: str
    target: str
    label: str = ""
    dashed: bool = False


def agent_layers(system: str, cfg: ExperimentConfig) -> dict[str, int]:
    """Row of each participant in the agent picture (peers share a row)."""
    n = cfg.mas.agents
    rows = {
        "sas": {"solver": 0, "tools": 1},
        "debate": {**{f"debater_{i}": 0 for i in range(n)}, "tools": 1, "system:controller": 1, "system:judge": 2,
                   ANSWER_RECIPIENT: 3},
        "supervisor": {"supervisor": 0, "system:controller": 0, **{f"worker_{i}": 1 for i in range(n)}, "tools": 2},
        "orchestrator": {"planner": 0, "system:controller": 0, **{f"worker_{i}": 1 for i in range(n)}, "critic": 2,
                         "tools": 2, "aggregator": 3, ANSWER_RECIPIENT: 4},
    }
    return rows.get(system, {})


def agent_edges(system: str, cfg: ExperimentConfig) -> list[Edge]:
    """Directed edges between the participants of ``system``.

    Every edge to a participant other than ``tools`` is a message exactly as
    the trace's ``payload.sends`` records it (same ``from``/``to``; a test
    checks the two agree). Edges to ``tools`` stand for the agent's
    ``tool_call`` events, which are not messages and carry no ``sends``.
    """
    workers = [f"worker_{i}" for i in range(cfg.mas.agents)]
    if system == "sas":
        return [Edge(source="solver", target="tools", label="tool calls"),
                Edge(source="tools", target="solver", label="results", dashed=True)]
    if system == "debate":
        return _debate_edges([f"debater_{i}" for i in range(cfg.mas.agents)])
    if system == "supervisor":
        edges = [Edge(source="supervisor", target=w, label="handoff") for w in workers]
        edges += [Edge(source=w, target="supervisor", label="report") for w in workers]
        edges += [Edge(source=CONTROLLER, target="supervisor", label="decision", dashed=True)]
        return edges + [Edge(source=w, target="tools", dashed=True) for w in workers]
    if system == "orchestrator":
        return _orchestrator_edges(workers)
    raise UserError(f"no agent picture for system {system!r}; known: sas, debate, supervisor, orchestrator")


def _debate_edges(debaters: list[str]) -> list[Edge]:
    edges = [Edge(source=a, target=b, label="answer") for a in debaters for b in debaters if a != b]
    edges += [Edge(source=CONTROLLER, target=a, label="next round", dashed=True) for a in debaters]
    edges += [Edge(source=CONTROLLER, target=JUDGE_ACTOR, label="final vote", dashed=True),
              Edge(source=JUDGE_ACTOR, target=ANSWER_RECIPIENT, label="final answer", dashed=True)]
    return edges + [Edge(source=a, target="tools", dashed=True) for a in debaters]


def _orchestrator_edges(workers: list[str]) -> list[Edge]:
    edges = [Edge(source="planner", target=w, label="plan") for w in workers]
    edges += [Edge(source=w, target=t, label="answer") for w in workers for t in ("critic", "aggregator")]
    edges += [Edge(source="critic", target="aggregator", label="critique"),
              Edge(source="aggregator", target=CONTROLLER, label="cycle answer"),
              Edge(source=CONTROLLER, target="planner", label="relay", dashed=True)]
    # a further cycle hands each worker its own previous answer back
    edges += [Edge(source=CONTROLLER, target=w, label="own answer", dashed=True) for w in workers]
    edges += [Edge(source=CONTROLLER, target=ANSWER_RECIPIENT, label="final answer", dashed=True)]
    return edges + [Edge(source=a, target="tools", dashed=True) for a in (*workers, "critic", "aggregator")]


def _mid(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def mermaid_of(edges: Sequence[Edge]) -> str:
    """Mermaid flowchart text of the agent edges.

    >>> print(mermaid_of([Edge(source="a", target="b", label="hi")]))
    graph LR
        a["a"]
        b["b"]
        a -->|hi| b
    """
    names = list(dict.fromkeys(x for e in edges for x in (e.source, e.target)))
    lines = ["graph LR", *(f'    {_mid(x)}["{x}"]' for x in names)]
    for e in edges:
        arrow = "-.->" if e.dashed else "-->"
        lines.append(f"    {_mid(e.source)} {arrow}{f'|{e.label}|' if e.label else ''} {_mid(e.target)}")
    return "\n".join(lines)


def _layers(nodes: Sequence[str], edges: Sequence[Edge]) -> dict[str, int]:
    """Layer of each node: longest path from the first node over forward (non-back) edges."""
    succ: dict[str, list[str]] = {x: [] for x in nodes}
    for e in edges:
        succ[e.source].append(e.target)
    order: list[str] = []
    state: dict[str, int] = {}
    back: set[tuple[str, str]] = set()

    def visit(x: str) -> None:  # DFS marks back edges so cycles do not stretch the layout
        state[x] = 1
        for y in succ[x]:
            if state.get(y) == 1:
                back.add((x, y))
            elif y not in state:
                visit(y)
        state[x] = 2
        order.append(x)

    for x in nodes:
        if x not in state:
            visit(x)
    layer = {x: 0 for x in nodes}
    for x in reversed(order):
        for y in succ[x]:
            if (x, y) not in back:
                layer[y] = max(layer[y], layer[x] + 1)
    return layer


def draw_png(edges: Sequence[Edge], path: Path, title: str, nodes: Sequence[str] | None = None,
             layers: dict[str, int] | None = None) -> Path:
    """Draw a layered picture of the graph with matplotlib and write it atomically.

    ``layers`` fixes the row of some nodes; the others get the longest-path layer.
    """
    # A bare Figure, not pyplot: sweeps draw these in a worker thread, and pyplot's global figure
    # manager is not thread-safe.
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch

    names = list(dict.fromkeys([*(nodes or []), *(x for e in edges for x in (e.source, e.target))]))
    layer = {**_layers(names, edges), **(layers or {})}
    rows: dict[int, list[str]] = {}
    for x in names:
        rows.setdefault(layer[x], []).append(x)
    pos = {x: (i - (len(row) - 1) / 2, -lv) for lv, row in rows.items() for i, x in enumerate(row)}
    width = max(len(r) for r in rows.values())
    fig = Figure(figsize=(max(6.0, 2.2 * width), max(3.0, 1.4 * len(rows) + 1)))
    # The axes fill the figure (below the title): the limits below already leave a node's width of margin,
    # and a "tight" bounding box would draw the whole picture twice.
    ax = fig.add_axes((0.01, 0.01, 0.98, 0.9))
    for e in edges:
        (x0, y0), (x1, y1) = pos[e.source], pos[e.target]
        curve = 0.4 if y1 == y0 else 0.35 if y1 > y0 else 0.08
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=12, shrinkA=18,
                                     shrinkB=18, connectionstyle=f"arc3,rad={curve}", color="#555",
                                     linestyle="--" if e.dashed else "-", lw=1.0))
        if e.label:
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, e.label, fontsize=6, color="#333", ha="center", va="center",
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})
    for x, (px, py) in pos.items():
        system = x.startswith(("system:", "__"))
        ax.text(px, py, x, ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round,pad=0.4", "fc": "#eeeeee" if system else "#dde8ff", "ec": "#334"})
    xs = [p[0] for p in pos.values()]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(-max(rows) - 0.7, 0.7)
    ax.set_title(title, fontsize=10)
    ax.axis("off")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130)
    return write_bytes_atomic(path, buf.getvalue())


def workflow_edges(system: str, rt: RunContext) -> tuple[list[str], list[Edge], str]:
    """Nodes, edges (conditional ones dashed) and Mermaid text of the system's compiled graph."""
    from mas.systems import SYSTEMS

    if system not in SYSTEMS:
        raise UserError(f"unknown system {system!r}; known: {', '.join(sorted(SYSTEMS))}")
    graph = SYSTEMS[system](rt).compile().get_graph()
    edges = [Edge(source=e.source, target=e.target, label=str(e.data or ""), dashed=e.conditional)
             for e in graph.edges]
    return list(graph.nodes), edges, graph.draw_mermaid()


def write_graph_pictures(system_dir: str | Path, system: str, cfg: ExperimentConfig, *,
                         overwrite: bool = False) -> list[Path]:
    """Write the four picture files of ``system`` into ``system_dir`` (once: existing files are kept).

    >>> # write_graph_pictures(root / exp_id / "arith" / "debate", "debate", cfg)
    """
    from mas.llm.models import ModelSet

    d = Path(system_dir)
    paths = [d / f for f in PICTURE_FILES]
    if not overwrite and all(p.is_file() for p in paths):
        return paths
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=cfg.seed), question="")  # models are built lazily, never here
    nodes, wf_edges, wf_mermaid = workflow_edges(system, rt)
    mas_edges = agent_edges(system, cfg)
    write_text_atomic(paths[0], mermaid_of(mas_edges) + "\n")
    draw_png(mas_edges, paths[1], f"{system}: who talks to whom", layers=agent_layers(system, cfg))
    write_text_atomic(paths[2], wf_mermaid)
    draw_png(wf_edges, paths[3], f"{system}: control flow", nodes=nodes)
    return paths
