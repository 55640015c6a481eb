"""Issue 19, item 6: the conformal variants as the paper (and its released code) defines
them. Each test here fails on 7d37fe1."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from mas_econ.cli import build_parser
from attribution.conformal import (
    AUTO_CANDIDATES,
    AUTO_MIN_RECORDS,
    Aggregator,
    calibrate_file,
    choose_method,
    conformal_quantile,
    fit,
    load_calibration,
    prediction_set,
    segment_score,
    step_thresholds,
)
from attribution.conformal.evaluation import synthetic_records
from descriptor.errors import UserError
from tests.conformal_reference import rec, ref_halving_nodes, ref_tree_nodes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("method,tree", [("crsvp", ref_halving_nodes), ("crsvp_released", ref_tree_nodes)])
def test_crsvp_sets_are_nodes_of_the_binary_tree(method, tree):
    # 7d37fe1 grew the chain one step at a time: crsvp_order(4, 1) = [1, 0, 2, 3] gave {0, 1, 2}
    rng = np.random.default_rng(0)
    for n in range(1, 17):
        nodes = {frozenset(range(lo, hi + 1)) for lo, hi in tree(n)} | {frozenset()}
        for leaf in range(n):
            s = (rng.integers(0, 4, n) / 8).tolist()
            s[leaf] = 1.0  # the most likely step
            for u in (0.3, 1.0):
                h = step_thresholds(s, method, Aggregator(), u)
                for q in [0.0, *sorted(set(h.tolist()))]:
                    steps = frozenset(prediction_set(s, method, q, Aggregator(), u=u).steps)
                    assert steps in nodes, (n, leaf, q, sorted(steps))
    assert prediction_set([0.1, 0.6, 0.2, 0.1], "crsvp", 0.2, Aggregator(), u=0.5).steps == (0, 1)


def test_lse_segment_is_the_released_codes_normalised_logsumexp():
    # (1/beta)(log Σ_{i in segment} exp(beta m s_i) - log m), m = steps in the segment
    agg = Aggregator(kind="lse_segment", beta=2.0)
    s = [0.5, 0.25, 0.0, 1.0]
    want = (math.log(math.exp(2 * 2 * 0.25) + math.exp(0.0)) - math.log(2)) / 2.0
    assert segment_score(s, 1, 2, agg) == pytest.approx(want, rel=1e-12)
    assert segment_score(s, 0, 0, agg) == pytest.approx(0.5)  # one step: its score
    assert segment_score([0.5, 0.5, 0.5], 0, 1, agg) == pytest.approx(1.0)  # equal scores: m * s
    # limits: the segment's sum as beta -> 0, m * max as beta -> inf
    seg = [0.5, 0.25, 0.0]
    assert segment_score([*seg, 0.9], 0, 2, Aggregator(kind="lse_segment", beta=1e-6)) == pytest.approx(0.75, abs=1e-5)
    assert segment_score([*seg, 0.9], 0, 2, Aggregator(kind="lse_segment", beta=500)) == pytest.approx(1.5, abs=0.01)
    assert segment_score(s, 0, 3, agg) == math.inf  # boundary conditions kept
    assert segment_score(s, 2, 1, agg) == 0.0


def _parser() -> argparse.ArgumentParser:
    return build_parser(fill=["conformal", "calibrate", "predict-set"])


def test_max_aggregator_lambda_and_lse_beta_defaults():
    agg = Aggregator()
    assert 0.01 <= agg.lam <= 0.1 and agg.lam == 0.05  # the paper's range; the released config's default
    assert agg.beta == 1.0
    args = _parser().parse_args(["calibrate", "--scores", "s", "--method", "rf", "--alpha", "0.2", "--out", "o"])
    assert args.lam == 0.05 and args.beta == 1.0
    # the penalty is lam (k - j)/l on top of the maximum
    mx = Aggregator(kind="max")
    assert segment_score([0.2, 0.8, 0.1, 0.1], 0, 2, mx) == pytest.approx(0.8 + 0.05 * 2 / 4)


def test_twf_keeps_an_empty_intersection_empty_unless_asked():
    s = [0.1, 0.6, 0.2, 0.1]  # at q .2: lf {2, 3}, rf {0, 1}: no common step
    assert prediction_set(s, "twf", 0.2, Aggregator()).steps == ()
    assert prediction_set(s, "twf", 0.2, Aggregator(), twf_fallback=True).steps == (1,)
    assert fit([rec(0, s, 1)], "twf", 0.5, Aggregator()).twf_fallback is False
    base = ["calibrate", "--scores", "s", "--method", "twf", "--alpha", "0.2", "--out", "o"]
    assert _parser().parse_args(base).twf_fallback is False
    assert _parser().parse_args([*base, "--twf-fallback"]).twf_fallback is True


AUTO_CASE = [  # found by search: rf has the best in-sample removal rate, trim the best out of sample
    ([0.0, 0.5, 0.875, 0.625, 0.625, 0.0, 1.0], 1), ([0.75, 0.5, 0.625, 0.625, 0.125], 0),
    ([0.875, 0.125, 0.75, 0.5, 0.75, 0.125, 0.75, 0.75], 7), ([0.375, 0.125, 0.0, 0.0, 0.5], 0),
    ([0.125, 0.625, 0.5, 0.25, 0.5, 1.0, 1.0], 1), ([0.125, 0.875, 0.375, 0.75, 0.625, 0.875, 0.375, 1.0], 7),
    ([0.0, 0.125, 0.625, 0.375], 0), ([1.0, 0.625, 0.0, 0.25], 2), ([0.75, 0.25, 0.625, 0.0, 0.875], 3),
]


def test_auto_does_not_pick_by_in_sample_removal_rate():
    recs = [rec(i, s, e) for i, (s, e) in enumerate(AUTO_CASE)]
    in_sample = {}
    for m in AUTO_CANDIDATES:
        hs = [step_thresholds(r.step_scores, m, Aggregator()) for r in recs]
        q = conformal_quantile([h[r.mistake_step] for h, r in zip(hs, recs)], 0.3)
        in_sample[m] = np.mean([1 - np.sum(h <= q) / r.n_steps for h, r in zip(hs, recs)])
    assert max(in_sample, key=in_sample.get) == "rf"
    chosen, rates, _ = choose_method(recs, 0.3, Aggregator(), seed=0)
    assert chosen == "trim" and rates["trim"] > rates["rf"] + 0.1  # out-of-sample (inner CV) rates
    # and the records that choose never set q_hat
    f = fit(synthetic_records(AUTO_MIN_RECORDS, seed=3), "auto", 0.2, Aggregator(), seed=0)
    assert f.n_selection == AUTO_MIN_RECORDS // 2 and f.n == AUTO_MIN_RECORDS // 2


def test_the_measurements_do_not_credit_the_position_prior_figure_to_the_paper():
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    published = text[text.index("### Published reference numbers") : text.index("### Ours")]
    ref = next(p for p in published.split("\n\n") if "Conformal" in p and "0.31" in p)
    assert "0.26" not in ref, ref
    assert not re.search(r"(paper|issue)'s references:.*0\.26", text, re.S)


def test_old_calibrations_of_changed_definitions_are_refused(tmp_path):
    scores = tmp_path / "s.jsonl"
    scores.write_text("".join(r.model_dump_json() + "\n" for r in synthetic_records(12, seed=1)))
    for method, kind in (("crsvp", "sum"), ("rf", "lse"), ("rf", "sum")):
        cal = tmp_path / f"{method}-{kind}.json"
        calibrate_file(scores, method, 0.2, Aggregator(kind=kind), 0, cal)
        obj = json.loads(cal.read_text())
        assert obj["version"] == 4
        obj["version"] = 2  # as written before crsvp and lse followed the paper
        cal.write_text(json.dumps(obj))
        if method == "rf" and kind == "sum":
            assert load_calibration(cal).q_hat == obj["q_hat"]  # unchanged definitions still read
        else:
            with pytest.raises(UserError, match="version"):
                load_calibration(cal)


# --- issue 32, item 10: lse and crsvp as the paper writes them; the released code's as named variants ---------


def test_lse_has_the_trajectory_length_where_the_papers_formula_has_it():
    # (1/beta) log Σ_{i in segment} exp(beta l s_i) - log l, l = steps in the trajectory (4), not in the segment (2)
    s = [0.5, 0.25, 0.0, 1.0]
    want = math.log(math.exp(2 * 4 * 0.25) + math.exp(0.0)) / 2.0 - math.log(4)
    assert segment_score(s, 1, 2, Aggregator(kind="lse", beta=2.0)) == pytest.approx(want, rel=1e-12)
    assert segment_score(s, 0, 0, Aggregator(kind="lse", beta=1.0)) == pytest.approx(4 * 0.5 - math.log(4))
    # still grows with the segment at either end (what nests the filtrations)
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.random(9).tolist()
        agg = Aggregator(kind="lse", beta=float(rng.choice([0.1, 1.0, 10.0])))
        assert segment_score(x, 3, 5, agg) <= segment_score(x, 2, 5, agg) <= segment_score(x, 2, 6, agg)


def test_the_papers_crsvp_keeps_the_top1_leafs_score_and_the_released_code_interpolates_it():
    s, agg = [0.1, 0.6, 0.2, 0.1], Aggregator()
    for u in (0.1, 0.5, 1.0):
        assert step_thresholds(s, "crsvp", agg, u)[1] == pytest.approx(0.6 / 4)
        assert step_thresholds(s, "crsvp_released", agg, u)[1] == pytest.approx(u * 0.6 / 4)


def test_the_papers_crsvp_tree_halves_each_node_top_down():
    from attribution.conformal import halving_path, tree_path

    assert halving_path(5, 3) == [(3, 3), (3, 4), (0, 4)]
    assert tree_path(5, 3) == [(3, 3), (2, 3), (0, 3), (0, 4)]  # the released code pairs bottom-up
    s5 = [0.1, 0.1, 0.1, 0.6, 0.1]
    assert prediction_set(s5, "crsvp", 0.7 / 5, Aggregator(), u=1.0).steps == (3, 4)
    assert prediction_set(s5, "crsvp_released", 0.7 / 5, Aggregator(), u=1.0).steps == (2, 3)


def test_the_papers_floor_n_plus_1_alpha_th_largest_is_the_shared_quantile():
    from attribution.conformal import paper_rank

    rng = np.random.default_rng(2)
    for n in range(1, 60):
        scores = rng.random(n).tolist()
        for alpha in (0.05, 0.1, 0.2, 0.3, 0.5):
            k = math.floor((n + 1) * alpha + 1e-12)  # the paper's rank on the upper tail
            paper = math.inf if k == 0 else sorted(scores)[n - k]
            assert conformal_quantile(scores, alpha) == paper, (n, alpha)
            assert paper_rank(n, alpha) == n + 1 - k


def test_the_evaluator_shows_the_paper_and_the_released_crsvp_side_by_side():
    from attribution.conformal.evaluation import Evaluator

    ev = Evaluator(synthetic_records(40, seed=4), Aggregator(), splits=20, seed=0)
    paper, released = ev.run("crsvp", 0.2), ev.run("crsvp_released", 0.2)
    assert paper.ec.mean() >= 0.7 and released.ec.mean() >= 0.7  # both keep the guarantee (0.8 in expectation)
    assert not np.array_equal(paper.rr, released.rr)
