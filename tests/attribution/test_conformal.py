"""Conformal error attribution, the paper's methods: exactness against a direct
implementation of the definitions (tests/conformal_reference.py), coverage on
synthetic score files, file formats and CLI. The contiguous families beyond the
paper and auto: test_conformal_contiguous.py; the fidelity fixes of issue 19:
test_conformal_fidelity.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import main
from attribution.conformal import (
    AGGREGATORS,
    BASE_METHODS,
    INF,
    PAPER_METHODS,
    Aggregator,
    calibrate_file,
    conformal_quantile,
    fit,
    load_calibration,
    predict,
    predict_file,
    prediction_set,
    rank_for,
    record_u,
)
from attribution.conformal.evaluation import Evaluator, summarise, synthetic_records
from attribution.sources.scorefile import TrainSource, fingerprint, parse_score_lines, read_score_file
from descriptor.errors import UserError
from tests.conformal_reference import rec, ref_quantile, ref_score, ref_set

SUM = Aggregator()

# --- hand-computed cases ------------------------------------------------------


def test_hand_computed_sets_sum_aggregator():
    s = [0.1, 0.6, 0.2, 0.1]  # suffix g: inf .225 .075 .025; prefix g: .025 .175 .225 inf
    assert prediction_set(s, "lf", 0.1, SUM).steps == (2, 3)
    assert prediction_set(s, "lf", 0.225, SUM).steps == (1, 2, 3)  # tie with q_hat is included
    assert prediction_set(s, "lf", 0.02, SUM).steps == ()
    assert prediction_set(s, "rf", 0.2, SUM).steps == (0, 1)
    assert prediction_set(s, "twf", 0.225, SUM).steps == (1, 2)
    assert prediction_set(s, "twf", 0.2, SUM).steps == ()  # the paper: an empty intersection stays empty
    fallback = prediction_set(s, "twf", 0.2, SUM, twf_fallback=True)
    assert fallback.steps == (1,) and fallback.fallback  # the named option: top-1 step
    assert prediction_set(s, "vcp", 0.8, SUM).steps == (1, 2)  # 1 - s = .9 .4 .8 .9, not contiguous in general
    assert prediction_set([0.9, 0.1, 0.9], "vcp", 0.1, SUM).steps == (0, 2)


def test_hand_computed_crsvp_chain():
    s = [0.1, 0.6, 0.2, 0.1]  # top-1 step 1; tree nodes holding it: {1} -> {0,1} -> {0..3}
    # g of the chain: .15 .175 inf; the released code with u = .5: v = .075 .1625 inf
    assert prediction_set(s, "crsvp_released", 0.17, SUM, u=0.5).steps == (0, 1)
    assert prediction_set(s, "crsvp_released", 0.2, SUM, u=0.5).steps == (0, 1)  # {0,1,2} is not a tree node
    assert prediction_set(s, "crsvp_released", 0.07, SUM, u=0.5).steps == ()
    assert prediction_set(s, "crsvp_released", 0.07, SUM, u=0.9).steps == ()
    assert prediction_set(s, "crsvp_released", 0.07, SUM, u=0.1).steps == (1,)  # .015 <= .07
    # the paper: the top-1 leaf keeps g = .15 whatever u
    assert prediction_set(s, "crsvp", 0.07, SUM, u=0.1).steps == ()
    assert prediction_set(s, "crsvp", 0.15, SUM, u=0.1).steps == (1,)
    # five steps: the released tree pairs (0,1) (2,3) (4), then (0..3) (4), then the root
    s5 = [0.1, 0.1, 0.1, 0.6, 0.1]  # chain {3} {2,3} {0..3} whole: g .6/5 .7/5 .9/5 inf
    assert prediction_set(s5, "crsvp_released", 0.9 / 5, SUM, u=1.0).steps == (0, 1, 2, 3)
    assert prediction_set(s5, "crsvp_released", 0.7 / 5, SUM, u=1.0).steps == (2, 3)
    # the paper's tree halves top-down: (0..2) (3,4), then (3) (4): chain {3} {3,4} whole: g .6/5 .7/5 inf
    assert prediction_set(s5, "crsvp", 0.7 / 5, SUM, u=1.0).steps == (3, 4)
    assert prediction_set(s5, "crsvp", 0.69 / 5, SUM, u=1.0).steps == (3,)


def test_hand_computed_nfe_early_stopping():
    s = [0.1, 0.6, 0.2, 0.1]
    assert prediction_set(s, "lf", 0.1, SUM).nfe == 3  # s3, s2 in; s1 crosses
    assert prediction_set(s, "lf", 0.3, SUM).nfe == 3  # s0 never needed: whole = inf
    assert prediction_set(s, "lf", 0.02, SUM).nfe == 1
    assert prediction_set(s, "rf", 0.2, SUM).nfe == 3
    assert prediction_set(s, "lf", INF, SUM).nfe == 0
    assert prediction_set([0.5], "lf", 0.3, SUM).nfe == 0


def test_hand_computed_ties_zero_scores_and_max_lse():
    s = [0.5, 0.0, 0.0, 0.5]  # suffix g: inf .125 .125 .125
    assert prediction_set(s, "lf", 0.125, SUM).steps == (1, 2, 3)
    assert prediction_set(s, "lf", 0.1, SUM).steps == ()
    mx = Aggregator(kind="max", lam=0.4)  # suffix g: inf, .5+.4*2/4=.7, .5+.1=.6, .5
    assert prediction_set(s, "lf", 0.6, mx).steps == (2, 3)
    lse = Aggregator(kind="lse_segment", beta=2.0)  # (1/beta)(log Σ exp(beta m s_i) - log m), m suffix steps
    g1 = (math.log(2 + math.exp(3.0)) - math.log(3)) / 2.0  # suffix from step 1: m = 3
    g2 = (math.log(1 + math.exp(2.0)) - math.log(2)) / 2.0  # suffix from step 2: m = 2
    assert 0.5 < g2 < g1
    assert prediction_set(s, "lf", g1, lse).steps == (1, 2, 3)
    assert prediction_set(s, "lf", g2, lse).steps == (2, 3)
    assert prediction_set(s, "lf", 0.5, lse).steps == (3,)  # one step: beta * 1 * .5 / beta


def test_calibration_scores_boundaries_and_quantile_ties():
    s = [0.2, 0.4, 0.2]
    # error at the first step: lf needs the whole trajectory (inf), rf only {0}
    first, last = rec(0, s, 0), rec(1, s, 2)
    assert fit([first], "lf", 0.5, SUM).q_hat == INF
    assert fit([first, first], "rf", 0.5, SUM).q_hat == pytest.approx(0.2 / 3)
    assert fit([last, last], "rf", 0.5, SUM).q_hat == INF
    # length-1 trajectories: only the whole trajectory covers, and it scores inf
    one = rec(2, [0.9], 0)
    assert fit([one, one, one], "twf", 0.5, SUM).q_hat == INF
    assert fit([one, one, one], "vcp", 0.5, SUM).q_hat == pytest.approx(0.1)
    # quantile with ties: rank ceil(5 * 0.6) = 3 of [.1 .2 .2 .3]
    assert conformal_quantile([0.3, 0.2, 0.1, 0.2], 0.4) == 0.2
    assert conformal_quantile([0.3, 0.2, 0.1, 0.2], 0.1) == INF  # rank 5 > n
    assert rank_for(9, 0.3) == 7  # float arithmetic would give 8
    with pytest.raises(UserError, match="alpha"):
        rank_for(9, 1.0)


def test_tiny_alpha_gives_whole_trajectories_and_no_scorer_calls():
    recs = [rec(i, [0.1, 0.5, 0.3, 0.1], 1) for i in range(4)]
    for method in BASE_METHODS + ("auto",):
        f = fit(recs, method, 0.1, SUM)  # rank ceil(5 * 0.9) = 5 > 4
        assert f.q_hat == INF
        ps = predict(f, recs[0])
        assert ps.steps == (0, 1, 2, 3) and ps.nfe == 0


# --- randomised comparison with the reference ------------------------------------


def random_scores(rng, n):
    kind = rng.integers(4)
    if kind == 0:
        return rng.random(n).tolist()
    if kind == 1:  # coarse values: many ties between steps and between trajectories
        return (rng.integers(0, 5, n) / 4).tolist()
    if kind == 2:
        return [float(rng.choice([0.0, 0.5]))] * n
    return (rng.integers(0, 11, n) / 10).tolist()  # sums like .1 + .2 that round differently


def random_aggregator(rng):
    kind = AGGREGATORS[rng.integers(3)]
    return Aggregator(kind=kind, lam=float(rng.choice([0.0, 0.5, 1.0])), beta=float(rng.choice([0.5, 3.0, 20.0])))


def test_randomised_score_files_match_the_definitions():
    rng = np.random.default_rng(12345)
    for trial in range(400):
        agg, method = random_aggregator(rng), PAPER_METHODS[trial % len(PAPER_METHODS)]
        alpha = float(rng.choice([0.05, 0.1, 0.2, 0.3, 0.5, 0.9, round(float(rng.uniform(0.01, 0.99)), 3)]))
        fallback = bool(rng.random() < 0.5)
        recs = []
        for i in range(int(rng.integers(1, 9))):
            n = int(rng.integers(1, 8))
            recs.append(rec(i, random_scores(rng, n), int(rng.integers(n))))
        seed = int(rng.integers(100))
        f = fit(recs, method, alpha, agg, seed, twf_fallback=fallback)
        ref_scores = [ref_score(r.step_scores, r.mistake_step, method, agg, record_u(seed, r.id)) for r in recs]
        q = ref_quantile(ref_scores, alpha)
        assert f.q_hat == q, (trial, method, agg)
        for r in recs:
            ps = predict(f, r)
            want, want_nfe = ref_set(r.step_scores, method, q, agg, record_u(seed, r.id), fallback)
            assert set(ps.steps) == want, (trial, method, agg, r, q)
            assert ps.nfe == want_nfe, (trial, method, agg, r, q)
            # the equivalence coverage rests on (the twf fallback only adds coverage)
            score_in = ref_score(r.step_scores, r.mistake_step, method, agg, record_u(seed, r.id)) <= q
            if not ps.fallback:
                assert (r.mistake_step in ps.steps) == score_in


def test_contiguous_methods_give_intervals():
    rng = np.random.default_rng(7)
    for _ in range(300):
        s = random_scores(rng, int(rng.integers(1, 15)))
        agg, q = random_aggregator(rng), float(rng.uniform(0, 1.0))
        for method in [m for m in BASE_METHODS if m != "vcp"]:
            steps = prediction_set(s, method, q, agg, u=float(rng.uniform(0.01, 1))).steps
            assert list(steps) == list(range(steps[0], steps[-1] + 1)) if steps else True
        lf, rf = prediction_set(s, "lf", q, agg).steps, prediction_set(s, "rf", q, agg).steps
        assert not lf or lf[-1] == len(s) - 1
        assert not rf or rf[0] == 0


# --- the vectorised evaluator agrees with calibrate + predict per split -----------


def loop_split(ev, method, alpha, r):
    n_cal = len(ev.records) // 2
    perm = ev.perms[r]
    cal, test = [ev.records[i] for i in perm[:n_cal]], perm[n_cal:]
    if method in ("crsvp", "crsvp_released"):
        u = ev.u[r]
        q = ref_quantile([ref_score(ev.records[i].step_scores, ev.records[i].mistake_step, method, ev.agg, u[i])
                          for i in perm[:n_cal]], alpha)
        sets = [prediction_set(ev.records[i].step_scores, method, q, ev.agg, u[i]) for i in test]
        choice = None
    else:
        f = fit(cal, method, alpha, ev.agg, ev.seed, twf_fallback=ev.twf_fallback)
        q, choice = f.q_hat, f.resolved_method
        sets = [predict(f, ev.records[i]) for i in test]
    recs = [ev.records[i] for i in test]
    ec = np.mean([t.mistake_step in ps.steps for t, ps in zip(recs, sets)])
    rr = np.mean([1 - len(ps.steps) / t.n_steps for t, ps in zip(recs, sets)])
    return q, ec, rr, np.mean([ps.nfe for ps in sets]), choice


@pytest.mark.parametrize("method", BASE_METHODS + ("auto",))
def test_evaluator_matches_per_record_api(method):
    rng = np.random.default_rng(3)
    recs = [rec(i, random_scores(rng, n), int(rng.integers(n))) for i, n in enumerate(rng.integers(1, 12, 41))]
    for agg in (SUM, Aggregator(kind="max", lam=0.5), Aggregator(kind="lse", beta=4.0)):
        ev = Evaluator(recs, agg, splits=15, seed=5)
        for alpha in (0.1, 0.3, 0.5):
            m = ev.run(method, alpha)
            for r in range(ev.splits):
                q, ec, rr, nfe, choice = loop_split(ev, method, alpha, r)
                assert m.q_hat[r] == q
                assert m.ec[r] == pytest.approx(ec) and m.rr[r] == pytest.approx(rr)
                assert m.nfe[r] == pytest.approx(nfe)
                if method == "auto":
                    assert m.choice[r] == choice


# --- coverage on synthetic score files --------------------------------------------


@pytest.fixture(scope="module")
def synthetic():
    return synthetic_records(120, seed=11)


@pytest.mark.parametrize("agg", [SUM, Aggregator(kind="max", lam=0.05), Aggregator(kind="lse", beta=1.0)],
                         ids=lambda a: a.kind)
def test_coverage_over_1000_splits(synthetic, agg):
    ev = Evaluator(synthetic, agg, splits=1000, seed=0)
    fb = Evaluator(synthetic, agg, splits=1000, seed=0, twf_fallback=True)
    tol = 0.01  # ~5 standard errors of a mean over 1000 splits of 60 test trajectories
    for alpha in (0.1, 0.2, 0.3):
        upper = 1 - alpha + 1 / (len(synthetic) // 2 + 1)
        for method in PAPER_METHODS:
            res = summarise(ev.run(method, alpha), method, alpha, ev)
            assert res["ec_mean"] >= 1 - alpha - tol, res
            if method in ("vcp", "lf", "rf", "twf"):  # twf as the paper defines it (no fallback) is exact
                assert res["ec_mean"] <= upper + tol, res
            if method == "twf":  # the fallback option only adds coverage
                with_fb = summarise(fb.run("twf", alpha), "twf", alpha, fb)
                assert res["ec_mean"] <= with_fb["ec_mean"] <= res["ec_mean"] + with_fb["fallback_rate"] + 1e-9
            assert 0.0 <= res["rr_mean"] <= 1.0


def test_informative_scores_beat_position_free_sets(synthetic):
    ev = Evaluator(synthetic, SUM, splits=200, seed=1)
    assert ev.run("rf", 0.2).rr.mean() > 0.2  # sets rule out a real share of steps
    assert ev.run("vcp", 0.2).rr.mean() > 0.5


# --- score files, calibration files, CLI ------------------------------------------


def write_scores(path, recs, extra_lines=()):
    path.write_text("".join(r.model_dump_json() + "\n" for r in recs) + "".join(extra_lines))
    return path


@pytest.mark.parametrize(
    "line, needle",
    [
        ("{not json", "line 2: not valid JSON"),
        ('[1, 2]', "line 2: expected a JSON object"),
        ('{"id": "x", "n_steps": 2, "step_scores": [0.1], "mistake_step": 0}', "step_scores: expected 2 values"),
        ('{"id": "x", "n_steps": 2, "step_scores": [0.1, 1.5], "mistake_step": 0}', "step_scores[1]"),
        ('{"id": "x", "n_steps": 2, "step_scores": [0.1, 0.5], "mistake_step": 2}', "mistake_step"),
        ('{"id": "x", "step_scores": [0.1, 0.5], "mistake_step": 1}', "field 'n_steps'"),
        ('{"id": "x", "n_steps": "2", "step_scores": [0.1, 0.5]}', "field 'n_steps'"),
        ('{"id": "a", "n_steps": 1, "step_scores": [0.1]}', "duplicate id 'a'"),
    ],
)
def test_bad_score_lines_name_file_line_and_field(line, needle):
    good = '{"id": "a", "n_steps": 1, "step_scores": [0.5], "mistake_step": 0}'
    with pytest.raises(UserError) as err:
        parse_score_lines([good, line], "scores.jsonl")
    assert "scores.jsonl line 2" in str(err.value) and needle in str(err.value)


def test_empty_and_missing_score_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(UserError, match="no score records"):
        read_score_file(tmp_path / "empty.jsonl")
    with pytest.raises(UserError, match="not found"):
        read_score_file(tmp_path / "missing.jsonl")


def test_cli_conformal_writes_results_and_plots(tmp_path, capsys):
    null = '{"id": "new", "n_steps": 2, "step_scores": [0.3, 0.6], "mistake_step": null}\n'
    scores = write_scores(tmp_path / "s.jsonl", synthetic_records(30, seed=2), [null])
    out = tmp_path / "out"
    assert main.main(["conformal", "--scores", str(scores), "--method", "twf", "--splits", "40",
                      "--alpha", "0.2", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    for key in ("method", "alpha", "splits", "ec_mean", "ec_std", "rr_mean", "rr_std", "nfe_mean", "n"):
        assert key in res
    assert res["method"] == "twf" and res["n"] == 30 and res["n_skipped_null_mistake"] == 1
    for png in ("coverage_vs_target.png", "error_positions.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    curve = json.loads((out / "coverage_curve.json").read_text())
    assert set(curve) >= {"targets", *BASE_METHODS, "auto"}
    assert "1 skipped" in capsys.readouterr().out


def test_cli_calibrate_and_predict_set_round_trip(tmp_path, capsys):
    recs = synthetic_records(20, seed=4)
    scores = write_scores(tmp_path / "s.jsonl", recs)
    cal_path = tmp_path / "calibration.json"
    assert main.main(["calibrate", "--scores", str(scores), "--method", "rf", "--alpha", "0.3",
                      "--out", str(cal_path)]) == 0
    cal = json.loads(cal_path.read_text())
    assert cal["method"] == "rf" and cal["n"] == 20 and cal["fingerprint"] == fingerprint(scores)
    assert cal["q_hat"] == fit(recs, "rf", 0.3, SUM).q_hat
    capsys.readouterr()
    assert main.main(["predict-set", "--calibration", str(cal_path), "--scores", str(scores)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    f = fit(recs, "rf", 0.3, SUM)
    assert [r["set"] for r in rows] == [list(predict(f, r).steps) for r in recs]
    # alpha so small that q_hat is infinite: written as "inf", read back as inf
    calibrate_file(scores, "lf", 0.01, SUM, 0, cal_path)
    assert json.loads(cal_path.read_text())["q_hat"] == "inf"
    assert load_calibration(cal_path).q_hat == INF
    assert all(row["set"] == list(range(row["n_steps"])) for row in predict_file(cal_path, scores))


def test_calibration_records_the_scorer_of_its_scores(tmp_path):
    train = {"data_dir": None, "runs_dir": "/runs/cal", "spans": None, "subset": "all", "max_cases": None,
             "train_dir": None}
    recs = [r.model_copy(update={"scorer": "learned", "scorer_train": TrainSource(**train)})
            for r in synthetic_records(12, seed=5)]
    scores = write_scores(tmp_path / "s.jsonl", recs)
    assert json.loads(scores.read_text().splitlines()[0])["scorer"] == "learned"
    cal_path = tmp_path / "calibration.json"
    calibrate_file(scores, "rf", 0.2, SUM, 0, cal_path)
    cal = json.loads(cal_path.read_text())
    assert cal["scorer"] == "learned" and cal["scorer_train"] == train and cal["scorer_route"] is None
    assert load_calibration(cal_path).scorer_info().scorer_train == TrainSource(**train)


def test_calibration_files_without_a_scorer_still_read(tmp_path):
    scores = write_scores(tmp_path / "s.jsonl", synthetic_records(12, seed=6))
    cal_path = tmp_path / "calibration.json"
    calibrate_file(scores, "lf", 0.2, SUM, 0, cal_path)
    old = {k: v for k, v in json.loads(cal_path.read_text()).items() if not k.startswith("scorer")}
    cal_path.write_text(json.dumps(old))  # as written before the scorer was recorded
    cal = load_calibration(cal_path)
    assert cal.scorer is None and not cal.scorer_info().known and cal.q_hat == old["q_hat"]


def test_a_score_file_mixing_scorers_is_refused(tmp_path):
    recs = synthetic_records(6, seed=7)
    mixed = [r.model_copy(update={"scorer": "position" if i % 2 else "learned"}) for i, r in enumerate(recs)]
    with pytest.raises(UserError, match="different scorers"):
        calibrate_file(write_scores(tmp_path / "s.jsonl", mixed), "rf", 0.2, SUM, 0, tmp_path / "c.json")


def test_bad_calibration_file_is_a_user_error(tmp_path, capsys):
    bad = tmp_path / "cal.json"
    bad.write_text(json.dumps({"method": "lf"}))
    scores = write_scores(tmp_path / "s.jsonl", synthetic_records(3, seed=1))
    assert main.main(["predict-set", "--calibration", str(bad), "--scores", str(scores)]) == 2
    assert "cal.json: field" in capsys.readouterr().err


@pytest.mark.parametrize("field, value, says", [("alpha", 5, "field 'alpha'"), ("alpha", 0, "field 'alpha'"),
                                                ("n", -3, "field 'n'"), ("q_hat", -0.5, "is never negative")])
def test_a_calibration_with_a_field_out_of_its_range_is_refused(tmp_path, capsys, field, value, says):
    scores = write_scores(tmp_path / "s.jsonl", synthetic_records(12, seed=2))
    cal = tmp_path / "cal.json"
    calibrate_file(scores, "lf", 0.3, SUM, 0, cal)
    cal.write_text(json.dumps({**json.loads(cal.read_text()), field: value}))
    capsys.readouterr()
    assert main.main(["predict-set", "--calibration", str(cal), "--scores", str(scores)]) == 2
    assert says in capsys.readouterr().err


def test_predict_set_refuses_scores_of_another_scorer_than_the_calibrations(tmp_path, capsys):
    recs = synthetic_records(12, seed=2)
    position = write_scores(tmp_path / "p.jsonl", [r.model_copy(update={"scorer": "position"}) for r in recs])
    learned = write_scores(tmp_path / "l.jsonl", [r.model_copy(update={"scorer": "learned"}) for r in recs])
    cal = tmp_path / "cal.json"
    calibrate_file(position, "rf", 0.3, SUM, 0, cal)
    capsys.readouterr()
    assert main.main(["predict-set", "--calibration", str(cal), "--scores", str(position)]) == 0
    assert main.main(["predict-set", "--calibration", str(cal), "--scores", str(learned)]) == 2
    err = capsys.readouterr().err
    assert "scores of the 'learned' scorer" in err and "no coverage guarantee" in err
    unrecorded = write_scores(tmp_path / "u.jsonl", recs)  # a file that does not say: predicted as before
    assert main.main(["predict-set", "--calibration", str(cal), "--scores", str(unrecorded)]) == 0


# --- early stopping (lf/rf scanning a scorer that pays per step) ---------------------


@pytest.mark.parametrize("method", ["lf", "rf"])
@pytest.mark.parametrize("agg", [Aggregator(), Aggregator(kind="max", lam=0.3), Aggregator(kind="lse", beta=2.0)],
                         ids=["sum", "max", "lse"])
async def test_lazy_filtration_equals_the_full_scan_and_scores_only_what_it_needs(method, agg):
    from attribution.conformal import lazy_filtration_set, prefix_scores, suffix_scores

    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(1, 12))
        s = [float(x) for x in rng.choice([0.0, 0.1, 0.5, 0.5, 1.0], size=n)]  # ties on purpose
        edges = [*suffix_scores(s, agg), *prefix_scores(s, agg)]
        finite = [e for e in edges if math.isfinite(e)]
        for q in {0.0, INF, *finite, *[e + 1e-3 for e in finite]}:
            asked: list[int] = []

            async def score_at(i: int, s=s, asked=asked) -> float:
                asked.append(i)
                return s[i]

            lazy = await lazy_filtration_set(n, score_at, method, q, agg)
            full = prediction_set(s, method, q, agg)
            assert lazy.steps == full.steps and lazy.nfe == full.nfe == len(asked) == len(set(asked))
            assert (0 if method == "lf" else n - 1) not in asked or n == 1 and not asked  # g(whole) is inf


async def test_lazy_filtration_stops_at_the_first_crossing():
    from attribution.conformal import lazy_filtration_set

    s = [0.9, 0.8, 0.1, 0.0, 0.0, 0.1]
    asked: list[int] = []

    async def score_at(i: int) -> float:
        asked.append(i)
        return s[i]

    ps = await lazy_filtration_set(len(s), score_at, "lf", 0.03, Aggregator())  # (0.1 + 0.1) / 6 > 0.03 at step 2
    assert ps.steps == (3, 4, 5) and asked == [5, 4, 3, 2] and ps.nfe == 4
    with pytest.raises(UserError, match="lf and rf"):
        await lazy_filtration_set(len(s), score_at, "vcp", 0.03, Aggregator())
