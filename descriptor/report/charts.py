"""The report's charts as inline SVG (see :mod:`descriptor.report.svg` for why hand-made SVG).

- :func:`quality_cost_chart`: each system at (mean cost per run, success) with
  error bars both ways and the Pareto frontier;
- :func:`difference_chart`: one point per task, (success difference,
  cost difference) against the baseline, with the mean and its intervals;
- :func:`pca_chart`: the PCA of the task descriptors with feature loadings (a biplot).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from descriptor.report.svg import (
    Frame,
    axes,
    esc,
    label_elements,
    nice_ticks,
    num,
    place_labels,
    svg_doc,
    tick_text,
)
from descriptor.topology_analysis import pareto_frontier

FEATURE_NAMES = {
    "Q1_success_rate": "success", "Q2_completion_rate": "completion", "C1_latency_p95": "summed latency p95",
    "C2_tokens_total": "tokens", "C3_cost_total": "cost", "C4_tool_calls_total": "tool calls",
    "D1_tool_error_rate": "tool errors", "D2_communication_count": "messages",
    "D2_agent_to_agent_communication_count": "agent msgs", "D2_system_mediated_communication_count": "system msgs",
    "D3_handoff_count": "handoffs", "R1_success_var": "success var", "R2_latency_var": "summed latency var",
    "R3_tokens_var": "tokens var", "P1_steps_total": "steps", "P2_backtrack_rate": "backtracks",
    "P3_loop_score": "loops", "P4_verification_density": "verifications",
}


def _pct(v: float) -> str:
    return f"{100 * v:.0f}%"


def _span(lo: float, hi: float, pad: float = 0.06) -> tuple[float, float]:
    if hi <= lo:
        return lo - 1, hi + 1
    d = (hi - lo) * pad
    return lo - d, hi + d


def quality_cost_chart(bench: str, points: Sequence[Mapping[str, Any]], colors: Mapping[str, str], *,
                       cost_label: str) -> str:
    """``points``: system, cost, cost_lo, cost_hi, success, success_lo, success_hi (one per system)."""
    hi = max(max(p["cost_hi"], p["cost"]) for p in points)
    lo = min(min(p["cost_lo"], p["cost"]) for p in points)
    xlog = lo > 0 and hi / lo > 30
    f = Frame(x0=lo / 1.3 if xlog else 0.0, x1=hi * (1.3 if xlog else 1.08), y0=-0.02, y1=1.02, xlog=xlog,
              height=360, width=560)
    xt = [10 ** e for e in range(math.floor(math.log10(f.x0)), math.ceil(math.log10(f.x1)) + 1)
          if f.x0 <= 10 ** e <= f.x1] if xlog else nice_ticks(f.x0, f.x1)
    parts = axes(f, xlabel=cost_label + (" (log scale)" if xlog else ""), ylabel="success (95 % Wilson interval)",
                 title=f"{bench}: quality vs cost", xticks=xt, yticks=[0, 0.2, 0.4, 0.6, 0.8, 1.0], yfmt=_pct)
    front = pareto_frontier({p["system"]: (p["success"], p["cost"]) for p in points})
    fp = sorted((p for p in points if p["system"] in front), key=lambda p: p["cost"])
    if len(fp) > 1:
        d = f"M{num(f.px(fp[0]['cost']))},{num(f.py(fp[0]['success']))}"
        for a, b in zip(fp, fp[1:]):
            d += f" H{num(f.px(b['cost']))} V{num(f.py(b['success']))}"
        parts.append(f'<path class="frontier" d="{d}"/>')
    marks = []
    for p in points:
        x, y, c = f.px(p["cost"]), f.py(p["success"]), colors[p["system"]]
        tip = (f"{p['system']}: success {100 * p['success']:.1f}% [{100 * p['success_lo']:.1f}, "
               f"{100 * p['success_hi']:.1f}], {cost_label} {tick_text(p['cost'])} [{tick_text(p['cost_lo'])}, "
               f"{tick_text(p['cost_hi'])}]" + (", on the Pareto frontier" if p["system"] in front else ""))
        marks.append(
            f'<g class="mark"><title>{esc(tip)}</title>'
            f'<line class="err" stroke="{c}" x1="{num(x)}" x2="{num(x)}" y1="{num(f.py(p["success_lo"]))}" '
            f'y2="{num(f.py(p["success_hi"]))}"/>'
            f'<line class="err" stroke="{c}" x1="{num(f.px(p["cost_lo"]))}" x2="{num(f.px(p["cost_hi"]))}" '
            f'y1="{num(y)}" y2="{num(y)}"/>'
            f'<circle cx="{num(x)}" cy="{num(y)}" r="5" fill="{c}"'
            + (' class="front"' if p["system"] in front else "") + "/></g>")
    parts += marks
    texts = [p["system"] for p in points]
    placed = place_labels([(f.px(p["cost"]), f.py(p["success"]), t) for p, t in zip(points, texts)],
                          bounds=f.bounds, obstacles=[(f.px(p["cost"]), f.py(p["success"]), 6) for p in points])
    parts += label_elements(placed, texts)
    parts.append(f'<text class="note" x="{num(f.width - f.right)}" y="18" text-anchor="end">'
                 f'dashed: Pareto frontier ({esc(", ".join(front))})</text>')
    return svg_doc(f, parts, f"{bench}: success against {cost_label} per system")


def _jitter(task_id: str, width: float) -> float:
    """Deterministic horizontal jitter in [-width, width] from the task id (spreads tied differences)."""
    return (zlib.crc32(task_id.encode()) / 0xFFFFFFFF * 2 - 1) * width


def difference_chart(row: Mapping[str, Any], color: str, hrefs: Mapping[str, str], *, cost_label: str) -> str:
    """Per-task (success difference in points, cost difference) of ``row['system']`` minus the baseline,
    with the mean difference and its 95 % bootstrap intervals (G and K of the economics row)."""
    tasks = row["tasks"]
    dq = [100 * t["dq"] for t in tasks]
    dc = [t["dcost"] for t in tasks]
    k_lo, k_hi = row.get("K_ci_low"), row.get("K_ci_high")
    ylo, yhi = _span(min([*dc, 0.0, k_lo if k_lo is not None else 0.0]),
                     max([*dc, 0.0, k_hi if k_hi is not None else 0.0]))
    f = Frame(x0=-105, x1=105, y0=ylo, y1=yhi, width=420, height=320)
    title = f"{row['system']} − {row['baseline']}, per task (n = {len(tasks)})"
    parts = axes(f, xlabel="success difference (points; jittered ±2)", ylabel=f"{cost_label} difference",
                 title=title, xticks=[-100, -50, 0, 50, 100], xfmt=lambda v: f"{v:+.0f}" if v else "0")
    parts.append(f'<line class="zero" x1="{num(f.px(0))}" x2="{num(f.px(0))}" y1="{num(f.top)}" '
                 f'y2="{num(f.height - f.bottom)}"/>')
    parts.append(f'<line class="zero" x1="{num(f.left)}" x2="{num(f.width - f.right)}" y1="{num(f.py(0))}" '
                 f'y2="{num(f.py(0))}"/>')
    for t, x, y in zip(tasks, dq, dc):
        tip = f"{t['task_id']}: success {x:+.1f} points, {cost_label} {y:+.1f}"
        dot = (f'<circle class="dot" cx="{num(f.px(x + _jitter(t["task_id"], 2)))}" cy="{num(f.py(y))}" r="3.2" '
               f'fill="{color}"><title>{esc(tip)}</title></circle>')
        href = hrefs.get(t["task_id"])
        parts.append(f'<a href="{esc(href)}">{dot}</a>' if href else dot)
    g, k = 100 * row["G"], row["K"]
    if row.get("G_ci_low") is not None:
        parts.append(f'<line class="mean" x1="{num(f.px(100 * row["G_ci_low"]))}" x2="{num(f.px(100 * row["G_ci_high"]))}" '
                     f'y1="{num(f.py(k))}" y2="{num(f.py(k))}"/>')
    if k_lo is not None:
        parts.append(f'<line class="mean" x1="{num(f.px(g))}" x2="{num(f.px(g))}" y1="{num(f.py(k_lo))}" '
                     f'y2="{num(f.py(k_hi))}"/>')
    parts.append(f'<rect class="meanpt" x="{num(f.px(g) - 4)}" y="{num(f.py(k) - 4)}" width="8" height="8">'
                 f'<title>{esc(f"mean: success {g:+.1f} points, {cost_label} {k:+.1f} (95 % bootstrap intervals)")}'
                 f'</title></rect>')
    return svg_doc(f, parts, title)


def pca_chart(bench: str, pca: Mapping[str, Any], colors: Mapping[str, str], *, n_arrows: int = 6) -> str:
    """PCA of the task descriptors (points by system) with the ``n_arrows`` longest feature loadings."""
    ev = pca.get("explained_variance_ratio")
    pts = pca["points"]
    f = Frame(width=640, height=380, right=130)
    if not ev or not pts:
        parts = [f'<text class="title" x="{f.left}" y="18">{esc(bench)}: PCA not drawn (fewer than 2 task rows '
                 'or no variance)</text>']
        return svg_doc(Frame(width=560, height=40), parts, f"{bench}: PCA not available")
    xs, ys = [p["x"] for p in pts], [p["y"] for p in pts]
    r = max(max(map(abs, xs)), max(map(abs, ys)), 1e-9) * 1.12
    f.x0, f.x1, f.y0, f.y1 = -r, r, -r, r
    parts = axes(f, xlabel=f"PC1 ({100 * ev[0]:.0f}% of variance)",
                 ylabel=f"PC2 ({100 * ev[1]:.0f}%)" if len(ev) > 1 else "PC2",
                 title=f"{bench}: task descriptors, PCA with loadings")
    for p in pts:
        parts.append(f'<circle class="dot" cx="{num(f.px(p["x"]))}" cy="{num(f.py(p["y"]))}" r="3.2" '
                     f'fill="{colors[p["system"]]}"><title>{esc(p["system"])} · {esc(p["task_id"])}</title></circle>')
    loads = pca.get("loadings") or {}
    top = sorted(loads.items(), key=lambda kv: -math.hypot(*kv[1]))[:n_arrows]
    scale = 0.85 * r / max((math.hypot(*v) for _, v in top), default=1.0) if top else 1.0
    ends = []
    for name, (a, b) in top:
        x, y = f.px(a * scale), f.py(b * scale)
        parts.append(f'<line class="loading" x1="{num(f.px(0))}" y1="{num(f.py(0))}" x2="{num(x)}" y2="{num(y)}">'
                     f'<title>{esc(name)}: loadings {a:+.2f}, {b:+.2f}</title></line>')
        ends.append((x, y, FEATURE_NAMES.get(name, name)))
    placed = place_labels(ends, bounds=f.bounds,
                          obstacles=[(f.px(p["x"]), f.py(p["y"]), 3) for p in pts[:400]], font=10)
    parts += label_elements(placed, [t for _, _, t in ends], cls="label small")
    legend_x = f.width - f.right + 14
    for i, name in enumerate(sorted({p["system"] for p in pts})):
        y = f.top + 14 + 16 * i
        parts.append(f'<circle cx="{num(legend_x)}" cy="{num(y - 4)}" r="4" fill="{colors[name]}"/>'
                     f'<text class="label small" x="{num(legend_x + 9)}" y="{num(y)}">{esc(name)}</text>')
    return svg_doc(f, parts, f"{bench}: PCA biplot of task descriptors")
