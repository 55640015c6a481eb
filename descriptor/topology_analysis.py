"""Compare systems (topologies) by their task descriptors, per benchmark.

- Scaling: each feature z-scored over the benchmark's task descriptors
  (population std; a zero-variance feature scales to 0).
- Mahalanobis distance between systems' mean scaled vectors, with the
  Moore-Penrose pseudo-inverse of the (population) covariance of the task
  rows, so few tasks or collinear features never crash.
- Pareto frontier on (quality up, cost down): mean Q1_success_rate and mean
  cost (in the economics cost unit) per system.
- PCA (numpy SVD, equal to scikit-learn's full-SVD PCA) of the scaled task rows to 2-D, with each
  feature's loadings on the two components (for a biplot); UMAP too when the
  optional ``umap-learn`` is installed and there are at least 5 rows, else
  ``umap`` is null and ``umap_note`` says why.

Blank ``D1_tool_error_rate`` (no tool calls) is read as 0 here only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from descriptor.economics import EconomicsSettings

if TYPE_CHECKING:  # imported where the analysis runs, after the runs are read (the summaries' workers skip it)
    import numpy as np

TOPOLOGY_FEATURES: tuple[str, ...] = (
    "Q1_success_rate", "Q2_completion_rate",
    "C1_latency_p95", "C2_tokens_total", "C3_cost_total", "C4_tool_calls_total",
    "D1_tool_error_rate", "D2_communication_count", "D2_agent_to_agent_communication_count",
    "D2_system_mediated_communication_count", "D3_handoff_count",
    "R1_success_var", "R2_latency_var", "R3_tokens_var",
    "P1_steps_total", "P2_backtrack_rate", "P3_loop_score", "P4_verification_density",
)


def feature_matrix(descriptors: Sequence[dict[str, Any]]) -> np.ndarray:
    """Rows = descriptors, columns = :data:`TOPOLOGY_FEATURES` (blank -> 0)."""
    import numpy as np

    return np.array([[float(d[f] or 0.0) for f in TOPOLOGY_FEATURES] for d in descriptors], dtype=float).reshape(
        len(descriptors), len(TOPOLOGY_FEATURES))


def zscore(x: np.ndarray) -> np.ndarray:
    """Column z-scores with population std; zero-variance columns become 0."""
    import numpy as np

    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    safe = np.where(sd > 0, sd, 1.0)
    return np.where(sd > 0, (x - mu) / safe, 0.0)


def mahalanobis_matrix(z: np.ndarray, labels: Sequence[str]) -> dict[str, dict[str, float]]:
    """Pairwise distances between label means of ``z`` under the pooled pseudo-inverse covariance."""
    import numpy as np

    names = sorted(set(labels))
    lab = np.array(labels)
    centers = {n: z[lab == n].mean(axis=0) for n in names}
    cov = np.cov(z, rowvar=False, bias=True) if len(z) > 1 else np.zeros((z.shape[1], z.shape[1]))
    inv = np.linalg.pinv(np.atleast_2d(cov), hermitian=True)
    out: dict[str, dict[str, float]] = {}
    for a in names:
        out[a] = {}
        for b in names:
            delta = centers[a] - centers[b]
            out[a][b] = float(np.sqrt(max(0.0, float(delta @ inv @ delta))))
    return out


def pareto_frontier(points: dict[str, tuple[float, float]]) -> list[str]:
    """Names not dominated on (quality up, cost down), sorted by cost.

    >>> pareto_frontier({"a": (0.5, 10.0), "b": (0.8, 20.0), "c": (0.4, 30.0)})
    ['a', 'b']
    """
    def dominated(q: float, c: float) -> bool:
        return any(q2 >= q and c2 <= c and (q2 > q or c2 < c) for q2, c2 in points.values())

    keep = [n for n, (q, c) in points.items() if not dominated(q, c)]
    return sorted(keep, key=lambda n: (points[n][1], n))


def pca_embedding(z: np.ndarray) -> tuple[np.ndarray, list[float] | None]:
    """2-D PCA coordinates of the rows of ``z`` and explained variance ratios (None if degenerate).

    Plain numpy SVD of the centred rows: the same numbers as scikit-learn's
    ``PCA(svd_solver="full")`` (checked in the tests) without its import,
    which costs seconds on a loaded machine. Sign convention: the largest
    absolute loading of each component is positive.
    """
    coords, explained, _ = pca_with_loadings(z)
    return coords, explained


def pca_with_loadings(z: np.ndarray) -> tuple[np.ndarray, list[float] | None, np.ndarray]:
    """:func:`pca_embedding` plus the loadings: a (features x 2) array, column j = component j's unit vector
    (zeros when degenerate). A biplot draws feature i as the arrow ``loadings[i]``."""
    import numpy as np

    n = len(z)
    coords = np.zeros((n, 2))
    loadings = np.zeros((z.shape[1] if z.ndim == 2 else 0, 2))
    if n < 2 or not np.any(z.std(axis=0) > 0):
        return coords, None, loadings
    centred = z - z.mean(axis=0)
    _, sv, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(2, len(sv))
    signs = np.sign(vt[np.arange(k), np.argmax(np.abs(vt[:k]), axis=1)])
    comps = vt[:k] * signs[:, None]
    coords[:, :k] = centred @ comps.T
    loadings[:, :k] = comps.T
    ratio = sv**2 / np.sum(sv**2)
    return coords, [float(v) for v in ratio[:k]], loadings


UMAP_MIN_ROWS = 5
"""Task descriptors below which UMAP is not run (its neighbour graph needs a few points)."""


def umap_embedding(z: np.ndarray, seed: int) -> tuple[list[list[float]] | None, str | None]:
    """(2-D UMAP coordinates, None) when ``umap`` (the optional ``umap-learn``) is importable and there are >= 5
    rows; else (None, why not). The PCA is the embedding that is always there."""
    if len(z) < UMAP_MIN_ROWS:
        return None, f"{len(z)} task descriptors < {UMAP_MIN_ROWS}"
    try:
        import umap  # optional: pip install -e .[umap] (numba compiles it on first use, ~10-60 s)
    except ImportError:
        return None, "umap-learn is not installed (pip install -e .[umap]); see pca"
    reducer = umap.UMAP(n_components=2, n_neighbors=min(15, len(z) - 1), random_state=seed)
    return reducer.fit_transform(z).tolist(), None


def analyse_benchmark(descriptors: Sequence[dict[str, Any]], s: EconomicsSettings) -> dict[str, Any]:
    """Scaling, distances, frontier and embeddings for one benchmark's descriptors."""
    import numpy as np

    ds = sorted(descriptors, key=lambda d: (d["system"], d["task_id"]))
    labels = [d["system"] for d in ds]
    z = zscore(feature_matrix(ds))
    systems = sorted(set(labels))
    points = {}
    for name in systems:
        mine = [d for d in ds if d["system"] == name]
        points[name] = (sum(d["Q1_success_rate"] for d in mine) / len(mine), sum(s.cost(d) for d in mine) / len(mine))
    coords, explained, loadings = pca_with_loadings(z)
    embedding, why_not = umap_embedding(z, s.seed)
    return {
        "systems": systems,
        "features": list(TOPOLOGY_FEATURES),
        "system_vectors_z": {n: z[np.array(labels) == n].mean(axis=0).tolist() for n in systems},
        "mahalanobis": mahalanobis_matrix(z, labels),
        "quality_cost": {n: {"quality": q, "cost": c} for n, (q, c) in points.items()},
        "cost_unit": s.cost_unit,
        "pareto_frontier": pareto_frontier(points),
        "pca": {
            "explained_variance_ratio": explained,
            "loadings": {f: [float(a), float(b)] for f, (a, b) in zip(TOPOLOGY_FEATURES, loadings)},
            "points": [{"system": d["system"], "task_id": d["task_id"], "x": float(x), "y": float(y)}
                       for d, (x, y) in zip(ds, coords)],
        },
        "umap": embedding,
        "umap_note": why_not,
    }


def analyse_topology(descriptors: Sequence[dict[str, Any]], s: EconomicsSettings) -> dict[str, Any]:
    """:func:`analyse_benchmark` for every benchmark, keyed by benchmark name."""
    benches = sorted({d["benchmark"] for d in descriptors})
    return {b: analyse_benchmark([d for d in descriptors if d["benchmark"] == b], s) for b in benches}
