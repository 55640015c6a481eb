"""Economics (MAS vs SAS) and topology analysis on hand-made descriptors, incl. degenerate inputs."""

from __future__ import annotations

import numpy as np
import pytest

from descriptor.economics import EconomicsSettings, compute_economics
from descriptor.topology_analysis import (
    TOPOLOGY_FEATURES,
    analyse_topology,
    mahalanobis_matrix,
    pareto_frontier,
    zscore,
)
from descriptor.errors import UserError


def desc(system: str, task: str, q: float, tokens: float, usd: float = 0.0, bench: str = "b") -> dict:
    d = {f: 0.0 for f in TOPOLOGY_FEATURES}
    d.update(benchmark=bench, system=system, task_id=task, Q1_success_rate=q, C2_tokens_total=tokens, C3_cost_total=usd,
             D1_tool_error_rate=None)
    return d


DESCS = [
    desc("sas", "t0", 0.5, 1000), desc("sas", "t1", 0.25, 1000), desc("sas", "t2", 1.0, 1000),
    desc("mas", "t0", 1.0, 3000), desc("mas", "t1", 0.25, 2000), desc("mas", "t2", 0.75, 1500),
    desc("mas", "t9", 1.0, 1.0),  # not run by the SAS: ignored by economics
]


def test_economics_point_estimates():
    s = EconomicsSettings.for_unit("tokens")
    (row,) = compute_economics(DESCS, s)
    assert row["n_shared_tasks"] == 3
    assert row["G"] == pytest.approx((0.5 + 0.0 - 0.25) / 3)
    assert row["K"] == pytest.approx((2000 + 1000 + 500) / 3)
    assert row["extra_tokens"] == pytest.approx(row["K"])
    assert row["gain_per_1k_tokens"] == pytest.approx(row["G"] / (row["K"] / 1000))
    assert row["dU"] == pytest.approx(row["G"] - 1e-5 * row["K"])
    assert row["U_mas"] - row["U_sas"] == pytest.approx(row["dU"])
    # per-task dU: 0.48, -0.01, -0.255 -> 1 win, 0 ties, 2 losses; quality: win, tie, lose
    assert (row["win_share"], row["tie_share"], row["lose_share"]) == pytest.approx((1 / 3, 0.0, 2 / 3))
    assert (row["quality_win_share"], row["quality_tie_share"], row["quality_lose_share"]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert row["G_ci_low"] <= row["G"] <= row["G_ci_high"]
    assert row["K_ci_low"] <= row["K"] <= row["K_ci_high"]


def test_economics_is_seeded():
    rng = np.random.default_rng(0)
    ds = [desc(sy, f"t{i}", float(rng.random()), float(rng.integers(100, 5000))) for i in range(20) for sy in ("sas", "mas")]
    a = compute_economics(ds, EconomicsSettings.for_unit("tokens", seed=1))
    b = compute_economics(ds, EconomicsSettings.for_unit("tokens", seed=1))
    c = compute_economics(ds, EconomicsSettings.for_unit("tokens", seed=2))
    assert a == b
    assert (a[0]["G_ci_low"], a[0]["K_ci_high"]) != (c[0]["G_ci_low"], c[0]["K_ci_high"])
    assert a[0]["G"] == c[0]["G"]


def test_usd_unit_and_lambda():
    ds = [desc("sas", "t0", 0.5, 100, usd=0.01), desc("mas", "t0", 0.5, 50, usd=0.03)]
    (row,) = compute_economics(ds, EconomicsSettings.for_unit("usd", lam=2.0))
    assert row["K"] == pytest.approx(0.02)
    assert row["dU"] == pytest.approx(-0.04)
    assert row["gain_per_1k_tokens"] is None  # the MAS used fewer tokens
    assert row["lose_share"] == 1.0 and row["quality_tie_share"] == 1.0


def test_bad_settings_are_user_errors():
    with pytest.raises(UserError, match="--cost-unit"):
        EconomicsSettings.for_unit("joules")
    with pytest.raises(UserError, match="--lambda"):
        EconomicsSettings.for_unit("tokens", lam=-1.0)


def test_no_baseline_gives_no_rows():
    assert compute_economics([desc("mas", "t0", 1.0, 10)], EconomicsSettings()) == []


def test_pareto_frontier():
    assert pareto_frontier({"a": (0.5, 10.0), "b": (0.5, 20.0)}) == ["a"]
    assert pareto_frontier({"a": (0.5, 10.0), "b": (0.5, 10.0)}) == ["a", "b"]  # equal points: neither dominates
    assert pareto_frontier({"only": (0.0, 0.0)}) == ["only"]


def test_zscore_zero_variance_column():
    z = zscore(np.array([[1.0, 5.0], [3.0, 5.0]]))
    assert z[:, 1].tolist() == [0.0, 0.0]
    assert z[:, 0].tolist() == [-1.0, 1.0]


def test_mahalanobis_symmetric_and_zero_on_diagonal():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(6, 4))
    m = mahalanobis_matrix(z, ["x", "x", "x", "y", "y", "y"])
    assert m["x"]["x"] == 0.0 and m["x"]["y"] == pytest.approx(m["y"]["x"]) and m["x"]["y"] > 0


@pytest.mark.parametrize("descs", [
    [desc("sas", "t0", 1.0, 10)],  # one system, one task
    [desc("sas", "t0", 1.0, 10), desc("mas", "t0", 1.0, 10)],  # zero variance everywhere
    DESCS,
])
def test_topology_degenerate_inputs(descs):
    out = analyse_topology(descs, EconomicsSettings())
    t = out["b"]
    assert set(t["mahalanobis"]) == {d["system"] for d in descs}
    assert len(t["pca"]["points"]) == len(descs)
    assert t["pareto_frontier"]
    assert all(np.isfinite([p["x"] for p in t["pca"]["points"]]))


def test_pca_matches_scikit_learn():
    from sklearn.decomposition import PCA

    from descriptor.topology_analysis import pca_embedding

    z = zscore(np.random.default_rng(3).normal(size=(9, 5)))
    coords, ratio = pca_embedding(z)
    ref = PCA(n_components=2, svd_solver="full").fit(z)
    assert ratio == pytest.approx(ref.explained_variance_ratio_.tolist())
    ref_coords = ref.transform(z)
    for j in range(2):  # components are defined up to sign
        sign = np.sign(coords[:, j] @ ref_coords[:, j])
        assert coords[:, j] == pytest.approx(sign * ref_coords[:, j])


def test_win_and_lose_shares_have_bootstrap_intervals():
    from descriptor.economics import EconomicsSettings, compare_pair

    def d(q, tokens):
        return {"benchmark": "b", "system": "s", "Q1_success_rate": q, "C2_tokens_total": tokens, "C3_cost_total": 0.0}

    mas = [d(1.0, 100), d(0.0, 100), d(1.0, 100), d(0.5, 100)]
    sas = [d(0.0, 100), d(0.0, 100), d(1.0, 100), d(0.0, 100)]
    row = compare_pair(mas, sas, EconomicsSettings(n_boot=2000))
    assert row["win_share"] == 0.5 and row["lose_share"] == 0.0
    assert 0.0 <= row["win_share_ci_low"] <= 0.5 <= row["win_share_ci_high"] <= 1.0
    assert row["lose_share_ci_low"] == row["lose_share_ci_high"] == 0.0
