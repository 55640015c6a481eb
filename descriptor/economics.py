"""MAS-vs-SAS economics per benchmark, on the tasks both systems ran.

Per task: quality ``Q = Q1_success_rate``; cost ``C = C2_tokens_total``
(cost unit ``tokens``) or ``C3_cost_total`` (unit ``usd``); utility
``U = Q - lambda * C``. Per MAS system against the baseline (default
``sas``): collaboration gain ``G = Q_MAS - Q_SAS``, coordination cost
``K = C_MAS - C_SAS``, ``dU = U_MAS - U_SAS`` (task means), gain per extra
1k tokens ``G / (dTokens / 1000)`` (ratio of task means; blank when the MAS
uses no more tokens), and the share of tasks where the MAS wins, ties or
loses on utility and on quality. Confidence intervals: percentile bootstrap
over tasks (paired resampling, seeded, numpy ``linear`` percentiles; :mod:`descriptor.stats`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from descriptor.errors import UserError
from descriptor.io import write_csv_atomic, write_derived_json
from descriptor.layout import baseline_unit
from descriptor.stats import percentile_interval, resample_indices

if TYPE_CHECKING:  # imported where the bootstrap runs: the settings are needed before the runs are read, numpy after
    import numpy as np

DEFAULT_LAMBDA = {"tokens": 1e-5, "usd": 1.0}
"""Quality points given up per cost unit: 1e-5 per token (0.01 per 1k tokens), 1.0 per USD."""

COST_FIELD = {"tokens": "C2_tokens_total", "usd": "C3_cost_total"}

ECONOMICS_FIELDS: tuple[str, ...] = (
    "benchmark", "system", "baseline", "n_shared_tasks", "cost_unit", "lambda",
    "Q_mas", "Q_sas", "C_mas", "C_sas", "U_mas", "U_sas",
    "G", "G_ci_low", "G_ci_high", "K", "K_ci_low", "K_ci_high", "dU", "dU_ci_low", "dU_ci_high",
    "extra_tokens", "gain_per_1k_tokens", "gain_per_1k_tokens_ci_low", "gain_per_1k_tokens_ci_high",
    "win_share", "tie_share", "lose_share", "quality_win_share", "quality_tie_share", "quality_lose_share",
    "win_share_ci_low", "win_share_ci_high", "lose_share_ci_low", "lose_share_ci_high",
)


class EconomicsSettings(BaseModel):
    """How cost is measured and priced, and how the bootstrap runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    cost_unit: Literal["tokens", "usd"] = "tokens"
    lam: float = Field(default=DEFAULT_LAMBDA["tokens"], ge=0)
    """Quality per cost unit (per token, or per USD)."""
    baseline: str = "sas"
    seed: int = 0
    n_boot: int = Field(default=2000, ge=1)
    ci_level: float = Field(default=0.95, gt=0, lt=1)
    tie_tol: float = 1e-12
    """Differences within this are ties."""

    @classmethod
    def for_unit(cls, cost_unit: str, *, lam: float | None = None, baseline: str = "sas", seed: int = 0) -> EconomicsSettings:
        """Settings with the documented default lambda for ``cost_unit`` when ``lam`` is None."""
        if cost_unit not in DEFAULT_LAMBDA:
            raise UserError(f"--cost-unit {cost_unit!r}: expected one of {sorted(DEFAULT_LAMBDA)}")
        if lam is not None and not (math.isfinite(lam) and lam >= 0):
            raise UserError(f"--lambda {lam}: expected a finite number >= 0")
        return cls(cost_unit=cost_unit, lam=DEFAULT_LAMBDA[cost_unit] if lam is None else lam, baseline=baseline, seed=seed)

    def cost(self, d: dict[str, Any]) -> float:
        """Cost of one task descriptor in the configured unit."""
        return float(d[COST_FIELD[self.cost_unit]])


def _shares(diff: np.ndarray, tol: float) -> tuple[float, float, float]:
    import numpy as np

    n = len(diff)
    win, lose = int(np.sum(diff > tol)), int(np.sum(diff < -tol))
    return win / n, (n - win - lose) / n, lose / n


def compare_pair(mas: Sequence[dict[str, Any]], sas: Sequence[dict[str, Any]], s: EconomicsSettings) -> dict[str, Any]:
    """Economics row of one MAS against the baseline; both lists are aligned by task."""
    import numpy as np

    q_m = np.array([d["Q1_success_rate"] for d in mas], dtype=float)
    q_s = np.array([d["Q1_success_rate"] for d in sas], dtype=float)
    c_m = np.array([s.cost(d) for d in mas])
    c_s = np.array([s.cost(d) for d in sas])
    t_d = np.array([d["C2_tokens_total"] for d in mas], dtype=float) - np.array([d["C2_tokens_total"] for d in sas], dtype=float)
    g, k = q_m - q_s, c_m - c_s
    du = g - s.lam * k
    bench, system = mas[0]["benchmark"], mas[0]["system"]
    idx = resample_indices(len(g), seed=[s.seed, zlib.crc32(f"{bench}/{system}".encode())], n_boot=s.n_boot)
    extra = float(t_d.mean())
    row: dict[str, Any] = {
        "benchmark": bench, "system": system, "baseline": s.baseline, "n_shared_tasks": len(g),
        "cost_unit": s.cost_unit, "lambda": s.lam,
        "Q_mas": float(q_m.mean()), "Q_sas": float(q_s.mean()), "C_mas": float(c_m.mean()), "C_sas": float(c_s.mean()),
        "U_mas": float((q_m - s.lam * c_m).mean()), "U_sas": float((q_s - s.lam * c_s).mean()),
        "extra_tokens": extra,
    }
    for name, v in (("G", g), ("K", k), ("dU", du)):
        row[name] = float(v.mean())
        row[f"{name}_ci_low"], row[f"{name}_ci_high"] = percentile_interval(v[idx].mean(axis=1), s.ci_level)
    row["gain_per_1k_tokens"] = row["G"] / (extra / 1000) if extra > 0 else None
    boot_extra = t_d[idx].mean(axis=1)
    if row["gain_per_1k_tokens"] is not None and np.all(boot_extra > 0):
        row["gain_per_1k_tokens_ci_low"], row["gain_per_1k_tokens_ci_high"] = percentile_interval(
            g[idx].mean(axis=1) / (boot_extra / 1000), s.ci_level)
    else:  # some resample has no extra tokens: the ratio is undefined there
        row["gain_per_1k_tokens_ci_low"] = row["gain_per_1k_tokens_ci_high"] = None
    row["win_share"], row["tie_share"], row["lose_share"] = _shares(du, s.tie_tol)
    boot_du = du[idx]  # the same task resamples as the other intervals
    row["win_share_ci_low"], row["win_share_ci_high"] = percentile_interval(
        (boot_du > s.tie_tol).mean(axis=1), s.ci_level)
    row["lose_share_ci_low"], row["lose_share_ci_high"] = percentile_interval(
        (boot_du < -s.tie_tol).mean(axis=1), s.ci_level)
    row["quality_win_share"], row["quality_tie_share"], row["quality_lose_share"] = _shares(g, s.tie_tol)
    return {f: row[f] for f in ECONOMICS_FIELDS}


def compute_economics(descriptors: Sequence[dict[str, Any]], s: EconomicsSettings) -> list[dict[str, Any]]:
    """One row per (benchmark, MAS system) that shares at least one task with the baseline."""
    by_key = {(d["benchmark"], d["system"], d["task_id"]): d for d in descriptors}
    rows = []
    for bench, system in sorted({(d["benchmark"], d["system"]) for d in descriptors}):
        base = baseline_unit(system, s.baseline)  # a model-matrix unit is compared with its own model's baseline
        if system == base:
            continue
        tasks = sorted(t for (b, sy, t) in by_key if b == bench and sy == system and (bench, base, t) in by_key)
        if not tasks:
            continue
        pair_settings = s if base == s.baseline else s.model_copy(update={"baseline": base})
        rows.append(compare_pair([by_key[(bench, system, t)] for t in tasks],
                                 [by_key[(bench, base, t)] for t in tasks], pair_settings))
    return rows


def write_economics(root: Path, rows: Sequence[dict[str, Any]], s: EconomicsSettings) -> None:
    """``economics.json`` (settings + rows) and ``economics.csv`` at the experiment root."""
    write_derived_json(root / "economics.json", {"settings": s.model_dump(), "rows": list(rows)})
    write_csv_atomic(root / "economics.csv", rows, ECONOMICS_FIELDS)
