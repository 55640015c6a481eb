"""A tiny SVG toolkit for the report's charts: scales, ticks, elements and label placement.

Hand-made SVG rather than matplotlib or a JavaScript charting library: the
page stays one offline file per view with no script to vendor, charts cost
milliseconds to write (no matplotlib import, ~1 s), text stays text (crisp,
searchable, styled by the page's CSS), every mark can carry a tooltip
(``<title>``) and a link to its run or task, and labels are placed by
:func:`place_labels` so they never overlap each other or the points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C564B", "#999999")
"""Okabe-Ito colours (colour-blind safe), then two extras."""

CHAR_W = 0.62
"""Estimated width of one character in em (generous for a sans-serif UI font)."""


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def num(v: float) -> str:
    """Short coordinate text (2 decimals, no trailing zeros)."""
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi].

    >>> nice_ticks(0, 1)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    out = []
    v = start
    while v <= hi + step * 1e-9:
        out.append(round(v, 12) + 0.0)
        v += step
    return out


def tick_text(v: float) -> str:
    """Tick label with up to 3 significant digits, thousands as k.

    >>> [tick_text(v) for v in (0, 0.25, 2000, 12500, -1500)]
    ['0', '0.25', '2k', '12.5k', '-1.5k']
    """
    if abs(v) >= 1000:
        return f"{v / 1000:.3g}k"
    return f"{v:.3g}" if v != 0 else "0"


@dataclass(kw_only=True, slots=True)
class Frame:
    """Plot area inside an SVG of ``width`` x ``height`` px, with linear or log axes."""

    width: float = 520
    height: float = 340
    left: float = 62
    right: float = 16
    top: float = 30
    bottom: float = 46
    x0: float = 0.0
    x1: float = 1.0
    y0: float = 0.0
    y1: float = 1.0
    xlog: bool = False

    def _xt(self, v: float) -> float:
        return math.log10(max(v, 1e-12)) if self.xlog else v

    def px(self, x: float) -> float:
        a, b = self._xt(self.x0), self._xt(self.x1)
        return self.left + (self._xt(x) - a) / ((b - a) or 1.0) * (self.width - self.left - self.right)

    def py(self, y: float) -> float:
        return self.height - self.bottom - (y - self.y0) / ((self.y1 - self.y0) or 1.0) * (self.height - self.top - self.bottom)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        return self.left, self.top, self.width - self.right, self.height - self.bottom


def axes(f: Frame, *, xlabel: str, ylabel: str, title: str, xticks: Sequence[float] | None = None,
         yticks: Sequence[float] | None = None, yfmt=tick_text, xfmt=tick_text) -> list[str]:
    """Frame, grid lines, ticks, axis labels and title as SVG elements."""
    x0, y0, x1, y1 = f.bounds
    out = [f'<rect class="plotbg" x="{num(x0)}" y="{num(y0)}" width="{num(x1 - x0)}" height="{num(y1 - y0)}"/>']
    for v in yticks if yticks is not None else nice_ticks(f.y0, f.y1):
        y = f.py(v)
        out.append(f'<line class="grid" x1="{num(x0)}" x2="{num(x1)}" y1="{num(y)}" y2="{num(y)}"/>')
        out.append(f'<text class="tick" x="{num(x0 - 6)}" y="{num(y + 4)}" text-anchor="end">{esc(yfmt(v))}</text>')
    for v in xticks if xticks is not None else nice_ticks(f.x0, f.x1):
        x = f.px(v)
        out.append(f'<line class="grid" x1="{num(x)}" x2="{num(x)}" y1="{num(y0)}" y2="{num(y1)}"/>')
        out.append(f'<text class="tick" x="{num(x)}" y="{num(y1 + 16)}" text-anchor="middle">{esc(xfmt(v))}</text>')
    out.append(f'<text class="axis" x="{num((x0 + x1) / 2)}" y="{num(f.height - 8)}" text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text class="axis" transform="translate(14 {num((y0 + y1) / 2)}) rotate(-90)" '
               f'text-anchor="middle">{esc(ylabel)}</text>')
    out.append(f'<text class="title" x="{num(x0)}" y="18">{esc(title)}</text>')
    return out


def svg_doc(f: Frame, parts: Sequence[str], label: str) -> str:
    """The ``<svg>`` element (responsive: scales to its container's width)."""
    return (f'<svg class="chart" width="{num(f.width)}" height="{num(f.height)}" viewBox="0 0 {num(f.width)} '
            f'{num(f.height)}" role="img" aria-label="{esc(label)}" '
            f'xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>")


Box = tuple[float, float, float, float]


@dataclass(kw_only=True, slots=True, frozen=True)
class Placed:
    """A placed label: text at (x, y) with ``anchor``; ``leader`` is set when it sits away from its point."""

    x: float
    y: float
    anchor: str
    box: Box
    leader: tuple[float, float, float, float] | None


def text_box(x: float, y: float, text: str, anchor: str, font: float) -> Box:
    """Estimated bounding box (x0, y0, x1, y1) of ``text`` drawn at baseline (x, y)."""
    w = len(text) * font * CHAR_W + 2
    x0 = x if anchor == "start" else x - w if anchor == "end" else x - w / 2
    return x0, y - 0.8 * font, x0 + w, y + 0.25 * font


def _overlaps(a: Box, b: Box, pad: float = 1.0) -> bool:
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def _candidates(px: float, py: float, font: float):
    for d in (7, 12, 20, 30, 44, 62, 86):
        dd = d * 0.72
        yield px + d, py + font * 0.35, "start"
        yield px - d, py + font * 0.35, "end"
        yield px, py - d, "middle"
        yield px, py + d + font * 0.8, "middle"
        yield px + dd, py - dd, "start"
        yield px - dd, py - dd, "end"
        yield px + dd, py + dd + font * 0.6, "start"
        yield px - dd, py + dd + font * 0.6, "end"


def place_labels(items: Sequence[tuple[float, float, str]], *, bounds: Box,
                 obstacles: Sequence[tuple[float, float, float]] = (), font: float = 11) -> list[Placed]:
    """Place one label per (px, py, text) so that no two labels overlap, no label covers an obstacle
    (x, y, radius: the markers) and every label stays inside ``bounds``.

    Greedy, in input order: the first free spot of a widening ring around the
    point (right, left, above, below, then diagonals). A label that lands
    away from its point gets a leader line. If no spot is free (a crowded
    plot), the label goes to the free spot nearest its point on a coarse grid
    of the whole plot, still without overlap; only when the plot is full does
    it overlap (never silently: :func:`overlapping` counts those).
    """
    blocked: list[Box] = [(x - r, y - r, x + r, y + r) for x, y, r in obstacles]
    out: list[Placed] = []
    bx0, by0, bx1, by1 = bounds

    def free(box: Box) -> bool:
        return (box[0] >= bx0 and box[2] <= bx1 and box[1] >= by0 and box[3] <= by1
                and not any(_overlaps(box, b) for b in blocked))

    for px, py, text in items:
        spot = next(((x, y, a, b) for x, y, a in _candidates(px, py, font)
                     if free(b := text_box(x, y, text, a, font))), None)
        if spot is None:
            grid = [(x, y) for x in range(int(bx0), int(bx1), 8) for y in range(int(by0) + font, int(by1), 6)]
            grid.sort(key=lambda g: (g[0] - px) ** 2 + (g[1] - py) ** 2)
            spot = next(((x, y, "start", b) for x, y in grid if free(b := text_box(x, y, text, "start", font))),
                        (px + 7, py, "start", text_box(px + 7, py, text, "start", font)))
        x, y, anchor, box = spot
        far = math.dist((px, py), ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)) > 28
        leader = None
        if far:
            cx = min(max(px, box[0]), box[2])
            cy = min(max(py, box[1]), box[3])
            leader = (px, py, cx, cy)
        blocked.append(box)
        out.append(Placed(x=x, y=y, anchor=anchor, box=box, leader=leader))
    return out


def overlapping(placed: Sequence[Placed]) -> int:
    """How many pairs of placed labels overlap (0 unless the plot is full)."""
    return sum(1 for i, a in enumerate(placed) for b in placed[i + 1:] if _overlaps(a.box, b.box, pad=0))


def label_elements(placed: Sequence[Placed], texts: Sequence[str], cls: str = "label") -> list[str]:
    out = []
    for p, t in zip(placed, texts):
        if p.leader:
            x1, y1, x2, y2 = p.leader
            out.append(f'<line class="leader" x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}"/>')
        out.append(f'<text class="{cls}" x="{num(p.x)}" y="{num(p.y)}" text-anchor="{p.anchor}">{esc(t)}</text>')
    return out
