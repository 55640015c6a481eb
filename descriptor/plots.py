"""PNG plots written by ``summarize-experiment`` into ``<root>/plots/``.

- ``quality_vs_cost.png``: one panel per benchmark, each system at (mean cost,
  mean success), the Pareto frontier as a step line.
- ``success_ci.png``: task-averaged success per benchmark x system with a 95%
  percentile-bootstrap CI over tasks (seeded).
- ``pca.png``: PCA of the scaled task descriptors, coloured by system.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from descriptor.economics import EconomicsSettings
from descriptor.io import write_bytes_atomic
from descriptor.png import palette_png
from descriptor.stats import bootstrap_mean_ci

PLOT_FILES = ("quality_vs_cost.png", "success_ci.png", "pca.png")


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    write_bytes_atomic(path, palette_png(buf.getvalue()), durable=False)


def _panels(n: int) -> tuple[Any, list[Any]]:
    fig, axes = plt.subplots(1, max(n, 1), figsize=(5 * max(n, 1), 4), squeeze=False)
    return fig, list(axes[0])


def plot_quality_vs_cost(path: Path, topology: dict[str, Any], s: EconomicsSettings) -> None:
    fig, axes = _panels(len(topology))
    for ax, (bench, t) in zip(axes, sorted(topology.items())):
        qc = t["quality_cost"]
        for name, p in qc.items():
            ax.scatter(p["cost"], p["quality"], s=40)
            ax.annotate(name, (p["cost"], p["quality"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
        front = [qc[n] for n in t["pareto_frontier"]]
        ax.step([p["cost"] for p in front], [p["quality"] for p in front], where="post", color="grey", lw=1,
                label="Pareto frontier")
        ax.set_title(bench)
        ax.set_xlabel("mean tokens per run" if s.cost_unit == "tokens" else "mean cost per run (USD)")
        ax.set_ylabel("success rate")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=7, loc="lower right")
    _save(fig, path)


def plot_success_ci(path: Path, descriptors: Sequence[dict[str, Any]], rollups: Sequence[dict[str, Any]], seed: int) -> None:
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(rollups) + 2), 4))
    labels, means, lows, highs = [], [], [], []
    for row in rollups:
        vals = [d["Q1_success_rate"] for d in descriptors
                if d["benchmark"] == row["benchmark"] and d["system"] == row["system"]]
        lo, hi = bootstrap_mean_ci(vals, seed=seed)
        labels.append(f"{row['benchmark']}\n{row['system']}")
        means.append(row["success_rate"])
        lows.append(max(0.0, row["success_rate"] - lo))
        highs.append(max(0.0, hi - row["success_rate"]))
    x = np.arange(len(labels))
    ax.bar(x, means, yerr=[lows, highs], capsize=4, color="#7aa6c2")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("task-averaged success (95% bootstrap CI)")
    _save(fig, path)


def plot_pca(path: Path, topology: dict[str, Any]) -> None:
    fig, axes = _panels(len(topology))
    for ax, (bench, t) in zip(axes, sorted(topology.items())):
        for name in t["systems"]:
            pts = [p for p in t["pca"]["points"] if p["system"] == name]
            ax.scatter([p["x"] for p in pts], [p["y"] for p in pts], label=name, s=30)
        ev = t["pca"]["explained_variance_ratio"]
        ax.set_title(bench + ("" if ev else " (degenerate: no variance)"))
        ax.set_xlabel("PC1" + (f" ({ev[0]:.0%})" if ev else ""))
        ax.set_ylabel("PC2" + (f" ({ev[1]:.0%})" if ev and len(ev) > 1 else ""))
        ax.legend(fontsize=7)
    _save(fig, path)


def write_plots(plot_dir: Path, descriptors: Sequence[dict[str, Any]], rollups: Sequence[dict[str, Any]],
                topology: dict[str, Any], s: EconomicsSettings) -> list[Path]:
    """Write :data:`PLOT_FILES` into ``plot_dir``; returns their paths."""
    paths = [plot_dir / name for name in PLOT_FILES]
    plot_quality_vs_cost(paths[0], topology, s)
    plot_success_ci(paths[1], descriptors, rollups, s.seed)
    plot_pca(paths[2], topology)
    return paths
