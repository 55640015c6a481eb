"""Step scorers: cross-fitting discipline, the position prior, the learned classifier, scorer metrics."""

from __future__ import annotations

import random

import numpy as np
import pytest

from attribution.evaluate import removal_at_coverage, scorer_metrics
from attribution.scorers import SCORERS, ScorerContext, StepScores, cross_fit, get_scorer, per_trajectory, plan_folds
from attribution.scorers.features import step_features
from attribution.scorers.learned import fit_step_classifier
from attribution.scorers.position import fit_density, fit_position_prior
from attribution.sources.trajectory import Step, Trajectory
from descriptor.errors import UserError


def synth(tid: str, n: int, error_at: int, *, query: str | None = None, subset: str = "s") -> Trajectory:
    """Planner/coder/terminal log; the decisive step says 'I will assume' and the terminal then fails."""
    steps = []
    for i in range(n):
        agent = ["Planner", "Coder", "Computer_terminal"][i % 3]
        text = f"Working on part {i}. Let's compute the values."
        if agent == "Computer_terminal":
            text = "exitcode: 0 (execution succeeded)\nCode output: 12"
        if i == error_at:
            text = "I will assume the data is approximately the example placeholder and guess the value."
        if i == error_at + 1:
            text = "exitcode: 1 (execution failed)\nTraceback (most recent call last): KeyError: 'x' error"
        steps.append(Step(index=i, agent=agent, content=text))
    return Trajectory(id=tid, subset=subset, query=query or f"question {tid}", steps=steps,
                      mistake_agent=steps[error_at].agent, mistake_step=error_at)


def corpus(k: int = 30, seed: int = 0) -> list[Trajectory]:
    rng = random.Random(seed)
    out = []
    for i in range(k):
        n = rng.randint(6, 12)
        out.append(synth(f"t{i}", n, rng.randrange(n - 1), subset="a" if i % 2 else "b"))
    return out


def test_plan_folds_never_trains_on_the_scored_records() -> None:
    trajs = corpus(20)
    # Two records share a question: they must land in the same fold.
    trajs[3] = trajs[3].model_copy(update={"query": trajs[7].query.upper() + "  "})
    plan = plan_folds(trajs, [], folds=4, seed=1)
    assert len(plan) == 4
    scored = [i for f in plan for i in f.test_ids]
    assert sorted(scored) == sorted(t.id for t in trajs)
    for f in plan:
        assert not set(f.train_ids) & set(f.test_ids)
        assert ("t3" in f.test_ids) == ("t7" in f.test_ids)


def test_cross_fit_spy_scores_only_unseen_records() -> None:
    trajs = corpus(15)
    fits: list[set[str]] = []

    def fit(train: list[Trajectory]) -> int:
        fits.append({t.id for t in train})
        return len(fits) - 1

    seen_by: dict[str, int] = {}

    def score(model: int, t: Trajectory) -> list[float]:
        seen_by[t.id] = model
        return [0.5] * t.n_steps

    res = cross_fit(trajs, [], folds=5, seed=0, fit=fit, score=score)
    assert [r.id for r in res] == [t.id for t in trajs] and len(fits) == 5
    for tid, model in seen_by.items():
        assert tid not in fits[model]
    assert all(r.details["fold"] == seen_by[r.id] for r in res)


def test_separate_training_set_is_one_fit_and_overlap_is_excluded() -> None:
    train, targets = corpus(10, seed=1), [synth(f"new{i}", 8, 2) for i in range(4)]
    plan = plan_folds(targets, train, folds=5, seed=0)
    assert len(plan) == 1 and set(plan[0].train_ids) == {t.id for t in train}
    overlapping = [*train[:3], targets[0].model_copy(update={"id": "dup"})]  # same question as new0
    plan = plan_folds(targets, overlapping, folds=2, seed=0)
    assert len(plan) == 2 and sorted(i for f in plan for i in f.test_ids) == sorted(t.id for t in targets)
    for f in plan:
        assert not set(f.train_ids) & set(f.test_ids)
        assert ("new0" in f.test_ids) <= ("dup" not in f.train_ids)
    with pytest.raises(UserError, match="cannot cross-fit"):
        plan_folds([targets[0]], [], folds=5, seed=0)


def test_position_density_integrates_to_one_and_peaks_at_the_data() -> None:
    trajs = [synth(f"p{i}", 10, 1) for i in range(20)] + [synth("late", 10, 8)]
    d = fit_density(trajs)
    assert d.mass(0.0, 1.0) == pytest.approx(1.0, abs=1e-6)
    probs = d.step_probs(10)
    assert sum(probs) == pytest.approx(1.0) and int(np.argmax(probs)) == 1 and min(probs) > 0
    assert sum(fit_density([]).step_probs(7)) == pytest.approx(1.0)  # no data: uniform
    prior = fit_position_prior(trajs, min_per_subset=100)
    assert prior.by_subset == {} and prior.step_probs(trajs[0]) == pytest.approx(probs)


async def test_position_scorer_scores_in_unit_interval() -> None:
    trajs = corpus(12)
    res = await get_scorer("position")(trajs, ScorerContext(folds=3))
    for r, t in zip(res, trajs, strict=True):
        assert r.n_steps == t.n_steps and max(r.step_scores) == 1.0 and min(r.step_scores) > 0
        assert sum(r.details["raw_scores"]) == pytest.approx(1.0)


def test_features_are_per_step_and_label_free() -> None:
    t = synth("f", 7, 3)
    X, names = step_features(t)
    assert X.shape == (7, len(names)) and np.isfinite(X).all()
    unlabelled = t.model_copy(update={"mistake_step": None, "mistake_agent": None})
    assert np.array_equal(step_features(unlabelled)[0], X)
    assert X[4, names.index("cue_exit_fail")] == 1 and X[3, names.index("next_tool_fail")] == 1
    assert X[2, names.index("tool")] == 1 and X[1, names.index("tool")] == 0


async def test_learned_scorer_finds_the_cued_step_cross_fitted() -> None:
    trajs = corpus(30)
    res = await get_scorer("learned")(trajs, ScorerContext(folds=3, seed=0))
    m = scorer_metrics(res, trajs)["all"]
    assert m["top1_accuracy"] > 0.8 and m["auroc"] > 0.9
    assert all(max(r.step_scores) == pytest.approx(1.0) for r in res)
    clf = fit_step_classifier(trajs, kind="logreg")
    assert len(clf.probabilities(trajs[0])) == trajs[0].n_steps


async def test_per_trajectory_wrapper_and_validation() -> None:
    async def one(t: Trajectory, ctx: ScorerContext) -> StepScores:
        return StepScores(id=t.id, n_steps=t.n_steps, step_scores=[1.0] * t.n_steps, nfe=t.n_steps)

    trajs = corpus(3)
    res = await per_trajectory(one)(trajs, ScorerContext(concurrency=2))
    assert [r.nfe for r in res] == [t.n_steps for t in trajs] and all(r.seconds > 0 for r in res)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        StepScores(id="x", n_steps=2, step_scores=[0.5, 1.5])
    with pytest.raises(ValueError, match="2 scores for 3 steps"):
        StepScores(id="x", n_steps=3, step_scores=[0.5, 0.5])
    assert {"position", "learned"} <= set(SCORERS)


def test_scorer_metrics_top1_ties_and_auroc() -> None:
    trajs = [synth("a", 4, 1), synth("b", 4, 2)]
    res = [StepScores(id="a", n_steps=4, step_scores=[0.1, 0.9, 0.2, 0.3]),
           StepScores(id="b", n_steps=4, step_scores=[0.5, 0.5, 0.5, 0.5])]
    m = scorer_metrics(res, trajs)
    assert m["all"]["top1_accuracy"] == pytest.approx((1.0 + 0.25) / 2)
    assert m["s"]["auroc_within"] == pytest.approx((1.0 + 0.5) / 2)
    assert 0.5 < m["all"]["auroc"] <= 1.0
    pairs = [(np.array(r.step_scores), t.mistake_step) for r, t in zip(res, trajs)]
    assert removal_at_coverage(pairs, 1.0) == pytest.approx((3 / 4 + 0) / 2)  # threshold 0.5


@pytest.mark.slow
async def test_learned_beats_position_on_the_dev_split() -> None:
    from tests.attribution.test_attribution_data import DEV

    if not DEV.is_dir():
        from tests.shared_data import WHO_AND_WHEN_HOWTO

        pytest.skip(WHO_AND_WHEN_HOWTO)
    from attribution.sources.loaders import load_who_and_when_dir

    trajs = load_who_and_when_dir(DEV).trajectories
    ctx = ScorerContext(folds=5, seed=0)
    learned = scorer_metrics(await get_scorer("learned")(trajs, ctx), trajs)
    position = scorer_metrics(await get_scorer("position")(trajs, ctx), trajs)
    for subset in ("algorithm_generated", "hand_crafted"):
        assert learned[subset]["auroc"] > position[subset]["auroc"] + 0.1
        assert learned[subset]["top1_accuracy"] > position[subset]["top1_accuracy"]
