"""The report's statistics against independent computations (scipy) on fixed data, and bootstrap coverage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from descriptor.economics import EconomicsSettings, compare_pair, compute_economics
from descriptor.report.analysis import finding_sentence, paired_rows, utility_sentence
from descriptor.stats import bootstrap_mean_ci, p95, sign_test, wilson_interval


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (3, 10), (5, 6), (10, 10), (17, 40), (250, 1000), (1, 3)])
def test_wilson_matches_scipy(k, n):
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)


def test_wilson_without_runs_is_uninformative():
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize("better,worse", [(0, 0), (1, 0), (9, 2), (2, 9), (5, 5), (0, 12), (30, 18), (1, 1)])
def test_sign_test_matches_scipy(better, worse):
    diffs = [0.5] * better + [-0.25] * worse + [0.0] * 7
    t = sign_test(diffs)
    assert (t.better, t.worse, t.tied) == (better, worse, 7)
    want = 1.0 if better + worse == 0 else sps.binomtest(better, better + worse, 0.5).pvalue
    assert t.p_value == pytest.approx(want, rel=1e-12)


def test_sign_test_ties_use_the_tolerance():
    assert sign_test([1e-13, -1e-13, 0.1]).tied == 2


def test_p95_matches_numpy_linear():
    v = [3.0, 1.0, 10.0, 7.5, 2.0]
    assert p95(v) == pytest.approx(float(np.percentile(v, 95)))
    assert p95([]) is None


def test_bootstrap_mean_ci_is_seeded_and_brackets_the_mean():
    v = [0.1, 0.4, 0.9, 0.3, 0.5, 0.7]
    a, b = bootstrap_mean_ci(v, seed=3), bootstrap_mean_ci(v, seed=3)
    assert a == b and a[0] <= np.mean(v) <= a[1]
    assert bootstrap_mean_ci([2.0], seed=0) == (2.0, 2.0)


def _desc(system, task, q, tokens):
    return {"benchmark": "b", "system": system, "task_id": task, "Q1_success_rate": q, "C2_tokens_total": tokens,
            "C3_cost_total": 0.0, "n_runs": 4}


def test_paired_bootstrap_coverage():
    """G's 95 % paired bootstrap interval (economics, reused by the report) covers the true mean difference
    in roughly 95 % of repeated experiments of 40 tasks (percentile bootstraps run a little narrow)."""
    rng = np.random.default_rng(11)
    s = EconomicsSettings(n_boot=400)
    true_g = 0.1  # per task: MAS success ~ clip(SAS + N(0.1, 0.2)); SAS ~ U(0.2, 0.7), so no clipping
    covered, reps = 0, 300
    for _ in range(reps):
        q_s = rng.uniform(0.2, 0.7, 40)
        d = rng.normal(true_g, 0.2, 40)
        row = compare_pair([_desc("m", f"t{i}", q_s[i] + d[i], 100) for i in range(40)],
                           [_desc("s", f"t{i}", q_s[i], 100) for i in range(40)], s)
        covered += row["G_ci_low"] <= true_g <= row["G_ci_high"]
    assert 0.88 <= covered / reps <= 0.99, covered / reps


def test_paired_rows_reuse_economics_and_test_per_task_differences():
    descs = [_desc("sas", f"t{i}", q, 1000) for i, q in enumerate([0.5, 0.25, 1.0, 0.0, 0.5])]
    descs += [_desc("debate", f"t{i}", q, 3000) for i, q in enumerate([1.0, 0.25, 0.75, 0.5, 1.0])]
    s = EconomicsSettings()
    (econ,) = compute_economics(descs, s)
    (row,) = paired_rows([econ], descs, s)
    assert row["G"] == econ["G"] and row["G_ci_low"] == econ["G_ci_low"]  # reused, not recomputed
    assert [t["dq"] for t in row["tasks"]] == pytest.approx([0.5, 0.0, -0.25, 0.5, 0.5])
    assert (row["sign"].better, row["sign"].worse, row["sign"].tied) == (3, 1, 1)
    assert row["sign"].p_value == pytest.approx(sps.binomtest(3, 4, 0.5).pvalue)
    assert row["token_ratio"] == pytest.approx(3.0)
    assert "On 5 b tasks (4 runs each)" in row["sentence"]


def _row(g, lo, hi, n=50):
    from descriptor.stats import SignTest

    return {"benchmark": "gsm8k", "system": "debate", "baseline": "sas", "n_shared_tasks": n, "G": g,
            "G_ci_low": lo, "G_ci_high": hi, "token_ratio": 11.0, "runs_per_task": [2],
            "sign": SignTest(better=3, worse=1, tied=n - 4, p_value=0.625)}


def test_finding_says_not_distinguishable_when_the_interval_holds_zero():
    text = finding_sentence(_row(0.02, -0.01, 0.05))
    assert "not distinguishable from zero" in text and "+2.0 points" in text and "11× the tokens" in text
    assert "bootstrap interval is too narrow" not in text
    assert "not distinguishable" in finding_sentence(_row(0.0, 0.0, 0.0))  # all tasks tie: the interval is {0}


def test_finding_states_direction_n_and_interval():
    text = finding_sentence(_row(0.06, 0.02, 0.10))
    assert text.startswith("On 50 gsm8k tasks (2 runs each), debate solves 6.0 points more than sas (95 % CI +2.0 to +10.0)")
    assert "fewer" in finding_sentence(_row(-0.06, -0.10, -0.02))
    assert "trust the sign test" in finding_sentence(_row(0.5, 0.2, 0.8, n=4))


def test_utility_sentence_never_reads_a_cost_loss_as_a_quality_loss():
    row = {"system": "debate", "n_shared_tasks": 4, "cost_unit": "tokens", "lambda": 1e-5, "quality_win_share": 0.0,
           "quality_tie_share": 1.0, "quality_lose_share": 0.0, "win_share": 0.0, "tie_share": 0.0, "lose_share": 1.0}
    text = utility_sentence(row)
    assert "Quality: debate better on 0, same on 4, worse on 0 of 4 tasks" in text
    assert "worse on 4" in text and "lost on cost, not quality" in text


def test_stats_doctests_hold():
    import doctest

    import descriptor.stats

    result = doctest.testmod(descriptor.stats)
    assert result.attempted and not result.failed


def test_rollback_intervals_follow_the_reports_rules():
    """The rollback experiment's intervals are the report's: Wilson at z = 1.95996 (not 1.96), (0, 1) with no
    runs, the same seeded bootstrap of the mean."""
    from attribution.rollback.experiment import aggregate
    from descriptor.records import RollbackRecord

    base = dict(run="r", rollback_index=0, strategy="conformal", set=[1], restart_step=1, n_steps=10,
                steps_redone=1, tokens=1, answer="1", decisive_step=4, covered=True, wall_time_s=0.0)
    runs = [RollbackRecord(**{**base, "success": i % 3 != 0, "cost": 0.1 * i}) for i in range(7)]
    agg = aggregate(runs)
    assert agg["success_rate_ci"] == wilson_interval(4, 7)
    assert agg["cost_ci"] == bootstrap_mean_ci([0.1 * i for i in range(7)], seed=0)
    assert aggregate([])["success_rate_ci"] == (0.0, 1.0)


def test_each_statistic_is_defined_once():
    """Wilson, the bootstrap, the sign test and quantiles live in descriptor/stats.py and nowhere else."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"^\s*def \w*(wilson|bootstrap|sign_test|p95|percentile|quantile)\w*\(", re.M | re.I)
    allowed = {"descriptor/stats.py", "attribution/conformal/_calibrate.py",  # the conformal quantile: another rule
               "attribution/conformal/evaluation.py",
               "scripts/eval_conformal_heldout.py"}  # reruns whole evaluations per resample; its interval is ours
    found = [str(p.relative_to(root)) for d in ("descriptor", "benchmark", "mas", "attribution", "mas_econ", "scripts")
             for p in (root / d).rglob("*.py") if pattern.search(p.read_text(encoding="utf-8"))]
    assert sorted(set(found) - allowed) == []


def test_quantiles_are_numpys_linear_percentiles_bit_for_bit():
    # descriptor.stats interpolates in floats instead of calling np.percentile (its first call imports numpy.ma):
    # every summary number must stay the same, so the two are compared exactly, ties and odd sizes included.
    import numpy as np

    from descriptor.stats import percentile_interval, quantile

    rng = np.random.default_rng(7)
    for t in range(3000):
        n = int(rng.integers(1, 60 if t % 2 else 2500))
        x = [rng.random(n), rng.integers(0, 4, n) / 4, rng.normal(0, 1e4, n)][t % 3]
        q = [0.95, 0.5, 0.025, 0.975, float(rng.random())][t % 5]
        assert quantile(list(x), q) == float(np.percentile(x, 100 * q, method="linear"))
        a = (1 - q) / 2 * 100  # as percentile_interval has always computed its bounds
        lo, hi = np.percentile(x, [a, 100 - a], method="linear")
        assert percentile_interval(x, q) == (float(lo), float(hi))
