"""Pictures of each system, drawn offline from what the system declares and compiles to.

Per system directory ``<experiment>/<benchmark>/<system>/``:

- ``mas_graph.mmd`` / ``.png``: who talks to whom, from the topology's
  declaration (:attr:`mas.topologies.declaration.Topology.agents`: its
  participants, rows and message edges for this config). The Mermaid text is
  written here: LangGraph's ``draw_mermaid`` reads ``:`` in a node id as a
  subgraph separator and would show ``system:controller`` as ``controller``.
- ``workflow_graph.mmd`` / ``.png``: the control flow, from the compiled
  graph (``graph.get_graph()``: its nodes, edges and conditional edges;
  the Mermaid text is LangGraph's own ``draw_mermaid()``).

Nothing here is drawn by hand per system: a new topology gets both pictures
from its declaration and its graph. PNGs are drawn with matplotlib (Agg) in a
layered layout; edge labels are placed along their arcs where they overlap no
other label or node (labels at the arcs' midpoints ran into each other, e.g.
"answer" over "final answer"). No web service is called.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from descriptor.io import write_bytes_atomic, write_text_atomic
from descriptor.png import palette_png
from mas.config import ExperimentConfig
from mas.topologies.declaration import Message

PICTURE_FILES = ("mas_graph.mmd", "mas_graph.png", "workflow_graph.mmd", "workflow_graph.png")
LABEL_POSITIONS = (0.5, 0.38, 0.62, 0.28, 0.72, 0.2, 0.8)
"""Where along an arc (0 = source, 1 = target) a label may go, in order of preference."""


def _mid(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def mermaid_of(edges: Sequence[Message]) -> str:
    """Mermaid flowchart text of the agent edges.

    >>> print(mermaid_of([Message(source="a", target="b", label="hi")]))
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


def _layers(nodes: Sequence[str], edges: Sequence[Message]) -> dict[str, int]:
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


@dataclass(kw_only=True, slots=True)
class Drawing:
    """A laid-out picture: the figure, and the display boxes of its node and edge labels (for checks)."""

    figure: Any
    node_boxes: list[Any]
    label_boxes: list[Any]
    labels_dropped: int
    """Labels repeated on a sibling edge that found no free place (the sibling's label names them)."""


def _arc_point(p0: tuple[float, float], p2: tuple[float, float], rad: float, t: float) -> tuple[float, float]:
    """Point ``t`` of matplotlib's ``arc3,rad=...`` curve from ``p0`` to ``p2`` (display coordinates)."""
    (x0, y0), (x2, y2) = p0, p2
    cx, cy = (x0 + x2) / 2 + rad * (y2 - y0), (y0 + y2) / 2 - rad * (x2 - x0)
    a, b, c = (1 - t) ** 2, 2 * (1 - t) * t, t ** 2
    return a * x0 + b * cx + c * x2, a * y0 + b * cy + c * y2


def layout(edges: Sequence[Message], title: str, nodes: Sequence[str] | None = None,
           rows: dict[str, int] | None = None) -> Drawing:
    """Lay the graph out in rows and place every edge label where it collides with no other label or node.

    ``rows`` fixes the row of some nodes; the others get their longest-path layer.
    """
    # A bare Figure, not pyplot: sweeps draw these in a worker thread, and pyplot's global figure
    # manager is not thread-safe.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch

    names = list(dict.fromkeys([*(nodes or []), *(x for e in edges for x in (e.source, e.target))]))
    layer = {**_layers(names, edges), **(rows or {})}
    by_row: dict[int, list[str]] = {}
    for x in names:
        by_row.setdefault(layer[x], []).append(x)
    pos = {x: (i - (len(row) - 1) / 2, -lv) for lv, row in by_row.items() for i, x in enumerate(row)}
    width = max(len(r) for r in by_row.values())
    fig = Figure(figsize=(max(6.0, 2.4 * width), max(3.0, 1.6 * len(by_row) + 1)))
    renderer = FigureCanvasAgg(fig).get_renderer()
    # The axes fill the figure (below the title): the limits leave a node's width of margin.
    ax = fig.add_axes((0.01, 0.01, 0.98, 0.9))
    xs = [p[0] for p in pos.values()]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(-max(by_row) - 0.7, 0.7)
    ax.set_title(title, fontsize=10)
    ax.axis("off")
    node_boxes = []
    for x, (px, py) in pos.items():
        system = x.startswith(("system:", "__"))
        text = ax.text(px, py, x, ha="center", va="center", fontsize=8, zorder=3,
                       bbox={"boxstyle": "round,pad=0.4", "fc": "#eeeeee" if system else "#dde8ff", "ec": "#334"})
        node_boxes.append(text.get_window_extent(renderer).expanded(1.05, 1.2))
    to_display = ax.transData.transform
    placed: list[tuple[Any, Message]] = []
    dropped = 0
    for e in edges:
        (x0, y0), (x1, y1) = pos[e.source], pos[e.target]
        rad = 0.4 if y1 == y0 else 0.35 if y1 > y0 else 0.08
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=12, shrinkA=18,
                                     shrinkB=18, connectionstyle=f"arc3,rad={rad}", color="#555",
                                     linestyle="--" if e.dashed else "-", lw=1.0))
        if not e.label:
            continue
        p0, p2 = tuple(to_display((x0, y0))), tuple(to_display((x1, y1)))
        text = ax.text(0, 0, e.label, fontsize=6, color="#333", ha="center", va="center", zorder=4,
                       bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85})
        best: tuple[int, Any, Any] | None = None
        for t in LABEL_POSITIONS:
            text.set_position(ax.transData.inverted().transform(_arc_point(p0, p2, rad, t)))
            box = text.get_window_extent(renderer).expanded(1.1, 1.3)
            hits = sum(box.overlaps(b) for b in node_boxes) + sum(box.overlaps(b) for b, _ in placed)
            if best is None or hits < best[0]:
                best = (hits, text.get_position(), box)
            if hits == 0:
                break
        assert best is not None
        sibling = any(m.label == e.label and (m.source == e.source or m.target == e.target) for _, m in placed)
        if best[0] and sibling:  # no free place, and a sibling edge already names this kind of message
            text.remove()
            dropped += 1
            continue
        text.set_position(best[1])
        placed.append((best[2], e))
    return Drawing(figure=fig, node_boxes=node_boxes, label_boxes=[b for b, _ in placed], labels_dropped=dropped)


def draw_png(edges: Sequence[Message], path: Path, title: str, nodes: Sequence[str] | None = None,
             rows: dict[str, int] | None = None) -> Path:
    """Draw the graph (see :func:`layout`) and write it as a palette PNG (:func:`palette_png`), atomically."""
    return write_bytes_atomic(path, _png_bytes(tuple(edges), title, None if nodes is None else tuple(nodes),
                                               None if rows is None else tuple(rows.items())))


@functools.lru_cache(maxsize=64)
def _png_bytes(edges: tuple[Message, ...], title: str, nodes: tuple[str, ...] | None,
               rows: tuple[tuple[str, int], ...] | None) -> bytes:
    """The PNG of one picture, drawn once per process: a picture is a function of its edges, nodes and title,
    and drawing the two of a system with matplotlib took 0.3-0.7 s of CPU per sweep (2-3 ms a run of a 200-run
    sweep), again in every sweep of a process that runs several (a notebook, a benchmark); a memo
    hit takes ~10 ms."""
    buf = io.BytesIO()
    layout(edges, title, nodes, None if rows is None else dict(rows)).figure.savefig(buf, format="png", dpi=130)
    return palette_png(buf.getvalue())


def agent_picture(system: str, cfg: ExperimentConfig) -> tuple[list[Message], dict[str, int]]:
    """The declared message edges of ``system`` under ``cfg`` and the row of each participant."""
    from mas.systems import get_system

    graph = get_system(system, cfg).agents(cfg.mas)
    return list(graph.messages), graph.rows()


def workflow_picture(system: str, cfg: ExperimentConfig) -> tuple[list[str], list[Message], str]:
    """Nodes, edges (conditional ones dashed) and Mermaid text of the system's compiled graph."""
    from mas.llm.models import ModelSet
    from mas.systems import get_system
    from mas.topologies.agent import RunContext

    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=cfg.seed), question="")  # models are built lazily, never here
    graph = get_system(system, cfg).build(rt).compile().get_graph()
    edges = [Message(source=e.source, target=e.target, label=str(e.data or ""), dashed=e.conditional)
             for e in graph.edges]
    return list(graph.nodes), edges, graph.draw_mermaid()


def write_graph_pictures(system_dir: str | Path, system: str, cfg: ExperimentConfig, *,
                         overwrite: bool = False) -> list[Path]:
    """Write the four picture files of ``system`` into ``system_dir`` (once: existing files are kept).

    >>> # write_graph_pictures(root / exp_id / "arith" / "debate", "debate", cfg)
    """
    d = Path(system_dir)
    paths = [d / f for f in PICTURE_FILES]
    if not overwrite and all(p.is_file() for p in paths):
        return paths
    nodes, wf_edges, wf_mermaid = workflow_picture(system, cfg)
    mas_edges, rows = agent_picture(system, cfg)
    write_text_atomic(paths[0], mermaid_of(mas_edges) + "\n")
    draw_png(mas_edges, paths[1], f"{system}: who talks to whom", nodes=list(rows), rows=rows)
    write_text_atomic(paths[2], wf_mermaid)
    draw_png(wf_edges, paths[3], f"{system}: control flow", nodes=nodes)
    return paths
