"""Rollback over every failed run of a sweep, per strategy, with confidence intervals."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attribution.conformal import Calibration
from attribution.sources.loaders import load_runs_dir
from attribution.rollback.progress import RollbackProgress
from attribution.rollback.restart import UNSCORED, Choice, check_configs, rollback_one, run_of, set_choice, tells
from attribution.sources.scorefile import TRAINED_SCORERS, ScoreRecord, ScorerInfo, TrainSource
from attribution.scorers.crossfit import group_key
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.io import write_json_atomic
from descriptor.records import ROLLBACK_STRATEGIES, RollbackRecord
from descriptor.stats import bootstrap_mean_ci, wilson_interval
from mas.logging import get_logger

log = get_logger(__name__)


@dataclass(kw_only=True, slots=True, frozen=True)
class ScoringSetup:
    """How rollback scores failed runs: resolved from the flags and the calibration's recorded scorer."""

    scorer: str
    route: str | None = None
    """Model route of an LLM scorer."""
    config: str | None = None
    """Experiment TOML holding the routes."""
    with_ground_truth: bool = False
    train: TrainSource | None = None
    """What a trained scorer is fitted on."""
    seed: int = 0

    def info(self) -> ScorerInfo:
        """The provenance written next to the scores (same fields as a score row)."""
        gt = None if self.scorer in TRAINED_SCORERS else self.with_ground_truth  # as score-steps records it
        return ScorerInfo(scorer=self.scorer, scorer_route=self.route, scorer_with_ground_truth=gt,
                          scorer_train=self.train if self.scorer in TRAINED_SCORERS else None)


DEFAULT_SCORER = "position"
"""Scorer used when neither the flags nor the calibration name one."""


def _train_source(train_dir: str | Path) -> TrainSource:
    return TrainSource(train_dir=str(Path(train_dir).resolve()))


def resolve_scoring(calibration: Calibration | None, *, scorer: str | None = None,
                    train_dir: str | Path | None = None, model: str | None = None, config: str | None = None,
                    with_ground_truth: bool = False, uses_calibration: bool = True,
                    seed: int = 0) -> ScoringSetup:
    """The scorer, training data and route to score new failed runs with.

    Defaults come from the calibration: its scores were made by one scorer
    (trained on recorded data), and its coverage guarantee only holds for new
    scores made the same way. Asking for another scorer while the calibration
    is used (``uses_calibration``) is a ``UserError``; an explicit
    ``--train-dir`` or ``--model`` that differs from the recorded one is
    allowed but logged, since the user may have moved the data.
    """
    rec = calibration.scorer_info() if calibration is not None else ScorerInfo()
    if scorer is not None and rec.known and scorer != rec.scorer and uses_calibration:
        raise UserError(
            f"the calibration was fitted on scores of the {rec.scorer!r} scorer; scoring with {scorer!r} would void "
            f"its coverage guarantee. Drop --scorer (the calibration's scorer is the default), or score the "
            f"calibration runs with `score-steps --scorer {scorer}` and `calibrate` again")
    name = scorer or rec.scorer or DEFAULT_SCORER
    same = rec.known and name == rec.scorer
    train = _train_source(train_dir) if train_dir is not None else (rec.scorer_train if same else None)
    if train_dir is not None and same and rec.scorer_train is not None and train != rec.scorer_train:
        log.warning("training the scorer on other data than the calibration's", train_dir=str(train_dir),
                    calibration_trained_on=rec.scorer_train.describe())
    if name in TRAINED_SCORERS and train is None:
        what = ("the calibration does not record what it was trained on" if calibration is not None
                else "there is no calibration to say what it was trained on")
        raise UserError(
            f"the {name!r} scorer is trained on labelled failed runs, and {what}: pass "
            f"--train-dir DIR (the failed runs whose scores the calibration was fitted on, e.g. the "
            f"calibration sweep's experiment root)")
    route = model if model is not None else (rec.scorer_route if same else None)
    if model is not None and same and rec.scorer_route is not None and model != rec.scorer_route:
        log.warning("scoring with another model route than the calibration's", route=model,
                    calibration_route=rec.scorer_route)
    if (same and name not in TRAINED_SCORERS and rec.scorer_with_ground_truth is not None
            and rec.scorer_with_ground_truth != with_ground_truth):
        log.warning("the calibration's scores were made with a different ground-truth setting; pass "
                    "--with-ground-truth/--without-ground-truth to match it",
                    calibration_with_ground_truth=rec.scorer_with_ground_truth, with_ground_truth=with_ground_truth)
    return ScoringSetup(scorer=name, route=route, config=config, with_ground_truth=with_ground_truth,
                        train=train, seed=seed)


def _load_training(src: TrainSource) -> list[Trajectory]:
    from attribution.jobs import load_train_source

    try:
        return load_train_source(src)
    except UserError as err:
        raise UserError(f"cannot load the scorer's training data ({src.describe()}): {err}. "
                        "Pass --train-dir DIR to train on other failed runs") from None


def training_for(targets: list[Trajectory], train: list[Trajectory]) -> list[Trajectory]:
    """The training runs to fit a scorer for ``targets``: those of other questions when there are any.

    Runs of a target's own question (another run of the task, or the target
    itself when it was part of the calibration sweep) would leak into its
    score; without them one model trained on the rest scores every target.
    When nothing else is labelled, the runs go to cross-fitting unchanged.
    """
    groups = {group_key(t) for t in targets}
    other = [t for t in train if group_key(t) not in groups and t.mistake_step is not None]
    if other:
        return other
    if len(groups) < 2:
        raise UserError(f"no labelled training run outside the question of {targets[0].id}: pass --train-dir DIR "
                        "with failed runs of other tasks")
    return train


def _scorer_context(setup: ScoringSetup, train: list[Trajectory]) -> Any:
    from attribution.jobs import ModelOptions, open_model
    from attribution.scorers.base import ScorerContext

    model, facts = open_model(ModelOptions(model=setup.route, config=setup.config, seed=setup.seed,
                                           with_ground_truth=setup.with_ground_truth))
    return ScorerContext(model=model, route=facts["route"], context_window=facts["context_window"],
                         count_tokens=facts["count_tokens"],
                         max_output_tokens=facts["max_output_tokens"], with_ground_truth=setup.with_ground_truth,
                         seed=setup.seed, train=train)


async def early_stopped_choices(trajs: list[Trajectory], setup: ScoringSetup | None,
                                calibration: Calibration | None) -> list[tuple[Choice, int]] | None:
    """Conformal restart choices with early stopping, and the model calls each needed; None when it does not apply.

    Applies when the calibration's method is ``lf`` or ``rf`` and the scorer
    pays per step (``llm_naive``, ``llm_roles``): each run's steps are scored
    only as far as the filtration scan reaches (same set as scoring them all).
    """
    from attribution.conformal import lazy_filtration_set
    from attribution.scorers.llm import LAZY_SCORERS, lazy_scores

    if setup is None or calibration is None or setup.route is None or setup.scorer not in LAZY_SCORERS:
        return None
    fitted = calibration.fitted()
    if fitted.resolved_method not in ("lf", "rf"):
        return None
    ctx = _scorer_context(setup, [])
    out = []
    for t in trajs:
        scores = lazy_scores(setup.scorer, t, ctx)
        ps = await lazy_filtration_set(t.n_steps, scores, fitted.resolved_method, fitted.q_hat, fitted.agg)
        out.append((set_choice(ps.steps, t.n_steps), scores.calls))
    return out


async def score_runs(trajs: list[Trajectory], setup: ScoringSetup) -> list[ScoreRecord]:
    """Step scores of ``trajs`` as ``setup`` says (trained scorers fit on its training data)."""
    from attribution.scorers import SCORERS

    if setup.scorer not in SCORERS:
        raise UserError(f"unknown scorer {setup.scorer!r}; known: {', '.join(sorted(SCORERS))}")
    train = training_for(trajs, _load_training(setup.train)) if setup.scorer in TRAINED_SCORERS and setup.train else []
    results = await SCORERS[setup.scorer]()(trajs, _scorer_context(setup, train))
    info = setup.info().model_dump()
    return [ScoreRecord(id=t.id, n_steps=r.n_steps, step_scores=r.step_scores, mistake_step=t.mistake_step,
                        mistake_agent=t.mistake_agent, nfe=r.nfe, **info) for t, r in zip(trajs, results, strict=True)]


def aggregate(all_records: Sequence[RollbackRecord]) -> dict[str, Any]:
    """Success rate, coverage and cost of one strategy's rollbacks, with 95 % intervals.

    ``coverage`` is the paper's rollback coverage: the share of runs (with a
    known decisive step) whose restart step is at or before it. ``set_coverage``
    is the share whose flagged set holds it (a set wholly before the error
    misses it but still restarts early enough). Success and coverage get Wilson
    intervals (``(0, 1)`` with no runs), the mean cost a percentile bootstrap (both
    :mod:`descriptor.stats`, the report's rules). Rollbacks that ended in an
    error (``status: error``: a damaged checkpoint, a model call that failed for
    good) are no outcome: counted in ``errors`` and left out of every other number.
    """
    records = [r for r in all_records if r.status != "error"]
    n = len(records)
    wins = sum(r.success for r in records)
    known = [r.restart_covers for r in records if r.restart_covers is not None]
    in_set = [r.covered for r in records if r.covered is not None]
    costs = [r.cost for r in records]
    return {
        "n": n,
        "errors": len(all_records) - n,
        "success_rate": wins / n if n else None, "success_rate_ci": wilson_interval(wins, n),
        "coverage": sum(known) / len(known) if known else None,
        "coverage_ci": wilson_interval(sum(known), len(known)), "coverage_n": len(known),
        "set_coverage": sum(in_set) / len(in_set) if in_set else None,
        "set_coverage_ci": wilson_interval(sum(in_set), len(in_set)),
        "cost": float(np.mean(costs)) if costs else None, "cost_ci": bootstrap_mean_ci(costs, seed=0),
        "tokens_mean": float(np.mean([r.tokens for r in records])) if records else None,
        "steps_redone_mean": float(np.mean([r.steps_redone for r in records])) if records else None,
        "set_size_mean": float(np.mean([len(r.set) for r in records])) if records else None,
        "fallback_rate": sum(r.fallback for r in records) / n if n else None,
    }


def check_strategies(strategies: Sequence[str]) -> None:
    """:class:`UserError` naming ``--strategies`` unless it lists at least one strategy and only known ones
    (checked before any scorer is set up, so a typo is not reported as a missing ``--train-dir``)."""
    bad = [s for s in strategies if s not in ROLLBACK_STRATEGIES]
    if bad or not strategies:
        raise UserError(f"--strategies: {'unknown strategy ' + ', '.join(bad) if bad else 'none given'}; "
                        f"expected a comma-separated list of {', '.join(ROLLBACK_STRATEGIES)}")


async def rollback_experiment(experiment_root: str | Path, *, calibration: Calibration | None,
                              strategies: Sequence[str], setup: ScoringSetup | None, out: str | Path,
                              concurrency: int = 4, note: bool = True) -> dict[str, Any]:
    """Roll back every failed run under ``experiment_root`` with each strategy; write ``rollback_results.json``.

    ``setup`` (from :func:`resolve_scoring`) says how to score the runs; it
    may be None when only ``restart`` is asked for. Rollbacks an earlier,
    interrupted invocation with the same ``out`` finished are reused, not
    redone (:mod:`attribution.rollback.progress`).
    """
    if concurrency < 1:
        raise UserError(f"--concurrency must be at least 1 (got {concurrency})")
    check_strategies(strategies)
    experiment_root = Path(experiment_root).resolve()  # records name their runs by path, readable from anywhere
    failed = load_runs_dir(experiment_root).trajectories
    if not failed:
        raise UserError(f"{experiment_root}: no failed run to roll back")
    check_configs(failed)
    if any(s not in UNSCORED for s in strategies) and setup is None:
        raise UserError("strategies other than restart and oracle need a scorer")
    if "oracle" in strategies and all(t.mistake_step is None for t in failed):
        raise UserError(f"strategy oracle: none of the {len(failed)} failed runs under {experiment_root} has a known "
                        "decisive step (only scripted runs with an injected error do); drop oracle from --strategies")
    progress = RollbackProgress(out, experiment_root)  # refuses a bad --out before any scoring call
    # top1 needs every step's score; conformal alone may stop scoring early.
    early = (await early_stopped_choices(failed, setup, calibration)
             if "conformal" in strategies and "top1" not in strategies else None)
    needs_scores = "top1" in strategies or ("conformal" in strategies and early is None)
    scores = await score_runs(failed, setup) if needs_scores and setup else [None] * len(failed)
    choices = early or [None] * len(failed)
    gate = asyncio.Semaphore(concurrency)
    # What chose each strategy's restart steps: a rollback made on the same basis is reused (see progress.py).
    scoring = setup.info().model_dump(mode="json") if setup else None
    fingerprint = None if calibration is None else calibration.fingerprint
    bases = {s: {} if s in UNSCORED else {"scoring": scoring, "calibration": fingerprint if s == "conformal" else None}
             for s in strategies}
    if not note:  # a rollback told of the failure is not reused for one that must not be, nor the other way
        bases = {s: {**b, "note": False} if tells(s) else b for s, b in bases.items()}

    async def one(i: int, strategy: str) -> RollbackRecord:
        t, sc = failed[i], scores[i]
        if (done := progress.get(strategy, bases[strategy], str(run_of(t).prefix))) is not None:
            return done
        async with gate:
            if strategy == "conformal" and choices[i] is not None:
                choice, nfe = choices[i]
                rec = await rollback_one(t, strategy=strategy, scores=None, calibration=calibration,
                                         scoring_nfe=nfe, choice=choice, keep_going=True, note=note)
            else:
                rec = await rollback_one(t, strategy=strategy, scores=sc, calibration=calibration,
                                         scoring_nfe=(sc.nfe or 0) if sc else 0, keep_going=True, note=note)
        progress.add(strategy, bases[strategy], rec)
        return rec

    results: dict[str, Any] = {}
    for strategy in strategies:
        # The oracle needs the decisive step: runs without one (natural failures) are left out of its row.
        todo = [i for i in range(len(failed)) if strategy != "oracle" or failed[i].mistake_step is not None]
        recs = await asyncio.gather(*(one(i, strategy) for i in todo))
        results[strategy] = {**aggregate(recs), "n_without_decisive_step": len(failed) - len(todo),
                             "runs": [r.model_dump(mode="json") for r in recs]}
    summary = {
        "experiment_root": str(experiment_root),
        "note": note,
        "scorer": setup.scorer if setup else None,
        "scoring": setup.info().model_dump(mode="json") if setup else None,
        "calibration": None if calibration is None else {
            "method": calibration.method, "alpha": calibration.alpha, "fingerprint": calibration.fingerprint,
            "scorer": calibration.scorer},
        **results,
    }
    write_json_atomic(Path(out) / "rollback_results.json", summary)
    return summary
