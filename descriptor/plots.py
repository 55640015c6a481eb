"""SVG plots written by ``summarize-experiment`` into ``<root>/plots/``.

- ``quality_vs_cost.svg``: one panel per benchmark, each system at (mean cost,
  mean success), the Pareto frontier as a step line.
- ``success_ci.svg``: task-averaged success per benchmark x system with a 95%
  percentile-bootstrap CI over tasks (seeded).
- ``pca.svg``: PCA of the scaled task descriptors, coloured by system.

Drawn with the report's SVG toolkit (:mod:`descriptor.report.svg`), styled by
the chart rules of the report's stylesheet copied into each file (so a plot
opens alone). Why not matplotlib's PNGs: importing matplotlib and drawing the
three figures cost ~1.2 s of CPU in a forked child, most of a cold summary's
start-up; these cost a few ms and stay text (searchable, crisp).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from descriptor.economics import EconomicsSettings
from descriptor.io import write_bytes_atomic
from descriptor.report.svg import PALETTE, Frame, axes, esc, label_elements, nice_ticks, num, place_labels
from descriptor.stats import bootstrap_mean_ci

PLOT_FILES = ("quality_vs_cost.svg", "success_ci.svg", "pca.svg")
_OLD_FILES = ("quality_vs_cost.png", "success_ci.png", "pca.png")
"""The PNGs earlier versions drew: removed, so a plots folder holds one drawing of each figure."""
_CSS = Path(__file__).parent / "report" / "templates" / "report.css"


@functools.cache  # read once per process, not once per plot
def _style() -> str:
    """The report stylesheet's ``svg`` rules (the one place the charts' look is decided)."""
    rules = [line for line in _CSS.read_text(encoding="utf-8").splitlines() if line.startswith("svg ")]
    return "<style>svg { font-family: system-ui, sans-serif; } " + " ".join(rules) + "</style>"


def _document(panels: Sequence[tuple[Frame, list[str]]], label: str) -> bytes:
    """One SVG file with ``panels`` side by side (matplotlib's one row of axes)."""
    width = sum(f.width for f, _ in panels)
    height = max(f.height for f, _ in panels)
    body, x = [], 0.0
    for f, parts in panels:
        body.append(f'<g transform="translate({num(x)} 0)">' + "".join(parts) + "</g>")
        x += f.width
    return (f'<svg width="{num(width)}" height="{num(height)}" viewBox="0 0 {num(width)} {num(height)}" role="img" '
            f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">{_style()}'
            f'<rect width="100%" height="100%" fill="#fff"/>' + "".join(body) + "</svg>\n").encode()


def _colors(systems: Sequence[str]) -> dict[str, str]:
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(sorted(set(systems)))}


def _span(values: Sequence[float], pad: float = 0.08) -> tuple[float, float]:
    lo, hi = min([0.0, *values]), max([0.0, *values])
    d = (hi - lo) * pad or 1.0
    return lo - (d if lo < 0 else 0.0), hi + d


def _quality_cost_panel(bench: str, t: dict[str, Any], colors: dict[str, str], xlabel: str) -> tuple[Frame, list[str]]:
    qc = t["quality_cost"]
    f = Frame(width=460, height=360, y0=-0.05, y1=1.05)
    f.x0, f.x1 = _span([p["cost"] for p in qc.values()])
    parts = axes(f, xlabel=xlabel, ylabel="success rate", title=bench, yticks=[0, 0.2, 0.4, 0.6, 0.8, 1.0])
    front = [qc[n] for n in t["pareto_frontier"]]
    if len(front) > 1:
        d = f"M{num(f.px(front[0]['cost']))},{num(f.py(front[0]['quality']))}"
        for b in front[1:]:
            d += f" H{num(f.px(b['cost']))} V{num(f.py(b['quality']))}"
        parts.append(f'<path class="frontier" d="{d}"/>')
    pts = [(f.px(p["cost"]), f.py(p["quality"]), name) for name, p in qc.items()]
    for (x, y, name), p in zip(pts, qc.values()):
        parts.append(f'<circle cx="{num(x)}" cy="{num(y)}" r="5" fill="{colors[name]}"><title>{esc(name)}: success '
                     f'{p["quality"]:.3f}, cost {p["cost"]:g}</title></circle>')
    parts += label_elements(place_labels(pts, bounds=f.bounds, obstacles=[(x, y, 6) for x, y, _ in pts]),
                            [name for _, _, name in pts])
    parts.append(f'<text class="note" x="{num(f.width - f.right)}" y="18" text-anchor="end">dashed: Pareto frontier'
                 f'</text>')
    return f, parts


def plot_quality_vs_cost(path: Path, topology: dict[str, Any], s: EconomicsSettings) -> None:
    colors = _colors([n for t in topology.values() for n in t["quality_cost"]])
    xlabel = "mean tokens per run" if s.cost_unit == "tokens" else "mean cost per run (USD)"
    panels = [_quality_cost_panel(b, t, colors, xlabel) for b, t in sorted(topology.items())]
    write_bytes_atomic(path, _document(panels, "success rate against mean cost per run, per system"), durable=False)


def plot_success_ci(path: Path, descriptors: Sequence[dict[str, Any]], rollups: Sequence[dict[str, Any]],
                    seed: int) -> None:
    rows = [r for r in rollups if r["success_rate"] is not None]  # a system whose runs all errored has no rate
    f = Frame(width=max(320, 96 * len(rows) + 120), height=360, y0=0, y1=1.05, bottom=52)
    parts = axes(f, xlabel="", ylabel="task-averaged success (95% bootstrap CI)", title="success by system",
                 xticks=[], yticks=nice_ticks(0, 1))
    slot = (f.width - f.left - f.right) / max(len(rows), 1)
    for i, row in enumerate(rows):
        vals = [d["Q1_success_rate"] for d in descriptors
                if d["benchmark"] == row["benchmark"] and d["system"] == row["system"]]
        lo, hi = bootstrap_mean_ci(vals, seed=seed)
        x, m = f.left + slot * (i + 0.5), row["success_rate"]
        top, base = f.py(m), f.py(0)
        tip = f"{row['benchmark']} {row['system']}: {m:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")
        parts.append(f'<rect x="{num(x - slot * 0.35)}" y="{num(top)}" width="{num(slot * 0.7)}" '
                     f'height="{num(base - top)}" fill="#7aa6c2"><title>{esc(tip)}</title></rect>')
        if lo is not None:
            y0, y1 = f.py(min(lo, m)), f.py(max(hi, m))
            parts.append(f'<path class="mean" fill="none" d="M{num(x)},{num(y0)} V{num(y1)} M{num(x - 5)},{num(y0)} '
                         f'H{num(x + 5)} M{num(x - 5)},{num(y1)} H{num(x + 5)}"/>')
        for k, text in enumerate((row["benchmark"], row["system"])):
            parts.append(f'<text class="tick" x="{num(x)}" y="{num(base + 16 + 13 * k)}" text-anchor="middle">'
                         f'{esc(text)}</text>')
    write_bytes_atomic(path, _document([(f, parts)], "task-averaged success per benchmark and system"), durable=False)


def _pca_panel(bench: str, t: dict[str, Any], colors: dict[str, str]) -> tuple[Frame, list[str]]:
    pts, ev = t["pca"]["points"], t["pca"]["explained_variance_ratio"]
    f = Frame(width=460, height=360, right=110)
    f.x0, f.x1 = _span([p["x"] for p in pts] or [0.0])
    f.x0 = min(f.x0, -f.x1 * 0.08)
    f.y0, f.y1 = _span([p["y"] for p in pts] or [0.0])
    f.y0 = min(f.y0, -f.y1 * 0.08)
    parts = axes(f, xlabel="PC1" + (f" ({ev[0]:.0%})" if ev else ""),
                 ylabel="PC2" + (f" ({ev[1]:.0%})" if ev and len(ev) > 1 else ""),
                 title=bench + ("" if ev else " (degenerate: no variance)"))
    for p in pts:
        parts.append(f'<circle class="dot" cx="{num(f.px(p["x"]))}" cy="{num(f.py(p["y"]))}" r="3.2" '
                     f'fill="{colors[p["system"]]}"><title>{esc(p["system"])} · {esc(p["task_id"])}</title></circle>')
    for i, name in enumerate(t["systems"]):
        x, y = f.width - f.right + 12, f.top + 14 + 16 * i
        parts.append(f'<circle cx="{num(x)}" cy="{num(y - 4)}" r="4" fill="{colors[name]}"/>'
                     f'<text class="label small" x="{num(x + 9)}" y="{num(y)}">{esc(name)}</text>')
    return f, parts


def plot_pca(path: Path, topology: dict[str, Any]) -> None:
    colors = _colors([n for t in topology.values() for n in t["systems"]])
    panels = [_pca_panel(b, t, colors) for b, t in sorted(topology.items())]
    write_bytes_atomic(path, _document(panels, "PCA of the task descriptors by system"), durable=False)


def write_plots(plot_dir: Path, descriptors: Sequence[dict[str, Any]], rollups: Sequence[dict[str, Any]],
                topology: dict[str, Any], s: EconomicsSettings) -> list[Path]:
    """Write :data:`PLOT_FILES` into ``plot_dir``; returns their paths."""
    paths = [plot_dir / name for name in PLOT_FILES]
    plot_quality_vs_cost(paths[0], topology, s)
    plot_success_ci(paths[1], descriptors, rollups, s.seed)
    plot_pca(paths[2], topology)
    for name in _OLD_FILES:
        (plot_dir / name).unlink(missing_ok=True)
    return paths
