"""The contiguous set families beyond the paper (trim, grow, band) and auto: exactness
against the rational reference (tests/conformal_reference.py), the edge cases of the
issue (ties, first/last step decisive, length-1 runs, q_hat = inf), nested contiguous
sets, and coverage over 1000 random splits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attribution.conformal import (
    AUTO_CANDIDATES,
    AUTO_MIN_RECORDS,
    CONTIGUOUS_METHODS,
    INF,
    Aggregator,
    auto_halves,
    choose_method,
    conformal_quantile,
    coverage_guard,
    fit,
    inner_splits,
    predict,
    prediction_set,
    step_thresholds,
)
from attribution.conformal.evaluation import Evaluator, summarise, synthetic_records
from tests.conformal_reference import NEW, rec, ref_new_h, ref_quantile, ref_score, ref_set

SUM = Aggregator()


def dyadic_scores(rng, n):
    """Scores on a grid of eighths (sums exact in floating point), often tied, sometimes all 0."""
    kind = rng.integers(4)
    if kind == 0:
        return [0.0] * n
    if kind == 1:
        return [float(rng.choice([0.25, 0.5, 1.0]))] * n
    return (rng.integers(0, 9, n) / 8).tolist()


# --- hand-computed cases ------------------------------------------------------------


def test_hand_computed_trim():
    s = [0.125, 0.5, 0.25, 0.125]  # mean .25; densities: ends .5, then .25/.25 = 1, core 2
    h = step_thresholds(s, "trim", SUM)
    assert h.tolist() == [1 / 1.5, 1 / 3, 1 / 2, 1 / 1.5]
    assert prediction_set(s, "trim", 0.4, SUM).steps == (1,)
    assert prediction_set(s, "trim", 0.5, SUM).steps == (1, 2)  # tie with q_hat is included
    assert prediction_set(s, "trim", 0.6, SUM).steps == (1, 2)
    assert prediction_set(s, "trim", 2 / 3, SUM).steps == (0, 1, 2, 3)
    # two peaks with a sparse gap: the gap is cut only together with the weaker peak
    two = [0.0, 1.0, 0.0, 0.0, 0.5, 0.0]  # mean .25: cut the zero ends (h 1), then [0 0 .5] (mean 1/6: h .6)
    assert prediction_set(two, "trim", 0.6, SUM).steps == (1, 2, 3, 4)
    assert prediction_set(two, "trim", 0.59, SUM).steps == (1,)  # the strong peak alone: density 4, h .2
    assert step_thresholds(two, "trim", SUM)[1] == 0.2


def test_hand_computed_grow_and_band():
    s = [0.25, 0.5, 0.125, 0.125]  # p = .25 .5 .125 .125
    assert step_thresholds(s, "grow", SUM).tolist() == [0.75, 0.5, 0.875, 1.0]  # outside mass .25 on each side: left first
    assert prediction_set(s, "grow", 0.8, SUM).steps == (0, 1)
    # band: F = .125 .5 .8125 .9375 -> h = 2|F - .5| = .75 0 .625 .875
    assert step_thresholds(s, "band", SUM).tolist() == [0.75, 0.0, 0.625, 0.875]
    assert prediction_set(s, "band", 0.7, SUM).steps == (1, 2)
    assert prediction_set(s, "band", 0.0, SUM).steps == (1,)


@pytest.mark.parametrize("method", CONTIGUOUS_METHODS)
def test_ties_first_and_last_steps_and_length_one(method):
    flat = [0.5] * 6  # every step equally likely
    h = step_thresholds(flat, method, SUM)
    if method == "trim":  # one cut takes everything: the set is empty or the whole run
        assert len(set(h.tolist())) == 1
    assert h.tolist() == ref_new_h(flat, method)
    zeros = [0.0] * 5  # no information: read as uniform
    assert step_thresholds(zeros, method, SUM).tolist() == step_thresholds([0.25] * 5, method, SUM).tolist()
    one = [0.7]
    assert step_thresholds(one, method, SUM).tolist() == ref_new_h(one, method)
    assert predict(fit([rec(0, one, 0)] * 4, method, 0.5, SUM), rec(9, one, 0)).steps == (0,)
    for e in (0, 5):  # decisive step first or last, with the mass at that end
        s = [0.0] * 6
        s[e] = 1.0
        f = fit([rec(i, s, e) for i in range(9)], method, 0.2, SUM)
        ps = predict(f, rec(99, s, e))
        assert e in ps.steps and ps.steps == tuple(range(ps.steps[0], ps.steps[-1] + 1))


@pytest.mark.parametrize("method", [*CONTIGUOUS_METHODS, "auto"])
def test_infinite_threshold_gives_the_whole_run_and_no_scorer_calls(method):
    recs = [rec(i, [0.1, 0.5, 0.3, 0.1], i % 4) for i in range(4)]
    f = fit(recs, method, 0.1, SUM)  # rank ceil(5 * 0.9) = 5 > n
    assert f.q_hat == INF
    ps = predict(f, recs[0])
    assert ps.steps == (0, 1, 2, 3) and ps.nfe == 0


# --- randomised comparison with the rational reference ----------------------------------


def test_thresholds_match_the_reference():
    rng = np.random.default_rng(2024)
    for _ in range(600):
        n = int(rng.integers(1, 13))
        exact, s = (True, dyadic_scores(rng, n)) if rng.random() < 0.7 else (False, rng.random(n).tolist())
        for method in NEW:
            h, want = step_thresholds(s, method, SUM), ref_new_h(s, method)
            if exact:  # one division of exact sums: bit-equal to the rounded rational
                assert h.tolist() == want, (method, s)
            else:
                assert np.allclose(h, want, rtol=0, atol=1e-12), (method, s)


def test_fit_and_predict_match_the_reference():
    rng = np.random.default_rng(99)
    for trial in range(300):
        method = NEW[trial % 3]
        alpha = float(rng.choice([0.05, 0.1, 0.2, 0.3, 0.5, 0.9]))
        recs = []
        for i in range(int(rng.integers(1, 10))):
            n = int(rng.integers(1, 9))
            recs.append(rec(i, dyadic_scores(rng, n), int(rng.integers(n))))
        f = fit(recs, method, alpha, SUM)
        q = ref_quantile([ref_new_h(r.step_scores, method)[r.mistake_step] for r in recs], alpha)
        assert f.q_hat == q
        for r in recs:
            ps = predict(f, r)
            want, want_nfe = ref_set(r.step_scores, method, q, SUM, 1.0)
            assert set(ps.steps) == want and ps.nfe == want_nfe
            assert (r.mistake_step in ps.steps) == (ref_new_h(r.step_scores, method)[r.mistake_step] <= q)


@pytest.mark.parametrize("method", CONTIGUOUS_METHODS)
def test_sets_are_nested_intervals(method):
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        s = rng.random(n).tolist() if rng.random() < 0.5 else dyadic_scores(rng, n)
        h = step_thresholds(s, method, SUM)
        assert np.all((h >= 0) & (h <= 1))
        previous: set[int] = set()
        for q in sorted(set(h.tolist())):  # every distinct set of the family, smallest first
            steps = prediction_set(s, method, q, SUM).steps
            assert steps == tuple(range(steps[0], steps[-1] + 1))
            assert previous <= set(steps)
            previous = set(steps)
        assert previous == set(range(n))


# --- auto -----------------------------------------------------------------------------


def ref_inner_cv(records, alpha, seed):
    """auto's rule from its docstring, with the reference's sets."""
    n = len(records)
    rates, cover = {}, {}
    for method in AUTO_CANDIDATES:
        rr, ec = [], []
        for perm in inner_splits(n, seed):
            test, cal = perm[: n // 3], perm[n // 3 :]
            q = ref_quantile([ref_score_any(records[i], method) for i in cal], alpha)
            sets = [ref_set(records[i].step_scores, method, q, SUM, 1.0)[0] for i in test]
            rr.append(np.mean([1 - len(c) / records[i].n_steps for c, i in zip(sets, test)]))
            ec.append(np.mean([records[i].mistake_step in c for c, i in zip(sets, test)]))
        rates[method], cover[method] = float(np.mean(rr)), float(np.mean(ec))
    eligible = [m for m in AUTO_CANDIDATES if cover[m] >= 1 - alpha - 2 * math.sqrt(alpha * (1 - alpha) / n) - 1e-12]
    return max(eligible, key=lambda m: (round(rates[m], 12), -AUTO_CANDIDATES.index(m))), rates, cover


def ref_score_any(r, method):
    return ref_score(r.step_scores, r.mistake_step, method, SUM, 1.0)


def test_auto_chooses_by_inner_cross_validation_and_fits_q_hat_on_the_other_half():
    rng = np.random.default_rng(17)
    for trial in range(4):
        size = AUTO_MIN_RECORDS + int(rng.integers(4))  # enough records to choose on half of them
        recs = [rec(i, dyadic_scores(rng, n), int(rng.integers(n))) for i, n in enumerate(rng.integers(2, 9, size))]
        alpha = float(rng.choice([0.2, 0.3, 0.5]))
        sel, rest = auto_halves(len(recs), seed=trial)
        chosen, rates, cover = choose_method([recs[i] for i in sel], alpha, SUM, seed=trial)
        want, want_rates, want_cover = ref_inner_cv([recs[i] for i in sel], alpha, trial)
        assert chosen == want
        assert rates == pytest.approx(want_rates, abs=1e-9) and cover == pytest.approx(want_cover, abs=1e-9)
        f = fit(recs, "auto", alpha, SUM, seed=trial)
        assert f.resolved_method == chosen and f.n_selection == len(sel) and f.n == len(rest)
        assert set(sel).isdisjoint(rest) and len(sel) + len(rest) == len(recs)
        q = conformal_quantile([ref_score_any(recs[i], chosen) for i in rest], alpha)
        assert f.q_hat == q


def test_auto_with_too_few_records_uses_trim():
    recs = [rec(i, [0.25, 0.5, 0.25], 1) for i in range(5)]
    f = fit(recs, "auto", 0.5, SUM)
    assert f.resolved_method == "trim" and f.auto_rates is None and f.n == 5
    assert coverage_guard(0.2, 100) == pytest.approx(0.8 - 0.08)


def test_auto_below_the_minimum_is_trim_fitted_on_every_calibration_record():
    """Issue 29: with a few dozen records, choosing on half and fitting q_hat on the other half picked below
    trim on unseen data; below AUTO_MIN_RECORDS auto is trim on all n (a choice made from n alone: exact)."""
    recs = synthetic_records(AUTO_MIN_RECORDS - 1, seed=5)
    f, t = fit(recs, "auto", 0.2, SUM, seed=3), fit(recs, "trim", 0.2, SUM, seed=3)
    assert (f.resolved_method, f.n, f.n_selection, f.q_hat) == ("trim", len(recs), 0, t.q_hat)
    ev = Evaluator(synthetic_records(2 * AUTO_MIN_RECORDS - 2, seed=5), SUM, splits=50, seed=0)
    auto, trim = ev.run("auto", 0.2), ev.run("trim", 0.2)
    assert np.array_equal(auto.rr, trim.rr) and np.array_equal(auto.ec, trim.ec)
    assert summarise(auto, "auto", 0.2, ev)["n_selection"] == 0
    big = fit(synthetic_records(AUTO_MIN_RECORDS, seed=5), "auto", 0.2, SUM)
    assert big.n_selection == AUTO_MIN_RECORDS // 2


# --- coverage ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic():
    return synthetic_records(120, seed=11)


def test_coverage_over_1000_splits(synthetic):
    ev = Evaluator(synthetic, SUM, splits=1000, seed=0)
    tol = 0.01  # ~5 standard errors of a mean over 1000 splits of 60 test trajectories
    n_cal = len(synthetic) // 2
    for alpha in (0.1, 0.2, 0.3):
        for method in (*CONTIGUOUS_METHODS, "auto"):
            res = summarise(ev.run(method, alpha), method, alpha, ev)
            n_q = n_cal - len(auto_halves(n_cal, 0)[0]) if method == "auto" else n_cal
            assert 1 - alpha - tol <= res["ec_mean"] <= 1 - alpha + 1 / (n_q + 1) + tol, res
            assert res["coverage_upper_bound"] == pytest.approx(1 - alpha + 1 / (n_q + 1))


def test_sharp_scores_give_small_contiguous_sets(synthetic):
    ev = Evaluator(synthetic, SUM, splits=200, seed=1)
    rf = ev.run("rf", 0.2).rr.mean()
    assert ev.run("trim", 0.2).rr.mean() > rf + 0.1  # the family uses where the mass is, not just a prefix
    assert ev.run("auto", 0.2).rr.mean() > rf
