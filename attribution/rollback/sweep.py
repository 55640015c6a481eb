"""Automatic rollback of a sweep's failed runs: what ``run --rollback STRATEGY`` does after the sweep.

Every failed run (finished, not successful) is rolled back once with one
strategy, through :func:`attribution.rollback.restart.rollback_one` with ``origin:
sweep``; a run that already has its sweep rollback (an earlier invocation of
the same sweep) is never rolled back again. ``<root>/rollback_sweep.json``
records how (:class:`descriptor.records.RollbackSweepRecord`), and the
summaries read the per-run records (:mod:`descriptor.rollback_summary`).

Where the restart step comes from:

- ``restart``: step 0; ``oracle``: the known decisive step (scripted runs with
  an injected error; runs without one are left as they are).
- ``conformal`` / ``top1`` with a calibration file: scored and chosen exactly
  as ``rollback-experiment`` does (the calibration names the scorer).
- ``conformal`` without one (self-calibration): the sweep's own labelled
  failed runs are the calibration data, **cross-fitted** so that no run is
  scored or calibrated by anything that saw it. The failed runs are dealt into
  ``folds`` groups by question (a task's runs under every system share one).
  For fold ``f``, the scorer is trained on the labelled runs of the other folds
  and scores fold ``f``'s runs; each run ``j`` of another fold ``g`` gets its
  calibration score from a scorer trained on the folds other than ``f`` and
  ``g`` (it never saw ``j`` nor fold ``f``); the conformal method (``auto`` by
  default: it chooses among the contiguous methods by inner cross-validation)
  is calibrated on those scores at ``alpha`` and gives fold ``f``'s sets. Each
  fold's calibration is a split-conformal calibration on runs exchangeable
  with fold ``f``'s, so the ``1 - alpha`` coverage argument holds per fold, up
  to the small difference that the calibration scores come from scorers fitted
  on one fold fewer than the test scores' scorer.
- ``top1`` without one: the most likely step of the cross-fitted scores.

Without a calibration file the decisive steps must be known, so only sweeps
of the scripted model with injected errors can calibrate themselves; other
sweeps pass ``--calibration`` (checked before any run starts).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attribution.conformal import Aggregator, Calibration, fit, load_calibration, predict
from attribution.sources.loaders import load_runs_dir
from attribution.rollback.restart import (
    UNSCORED,
    Choice,
    check_configs,
    choose_restart,
    rollback_one,
    run_of,
    set_choice,
    tells,
)
from attribution.rollback.experiment import early_stopped_choices, resolve_scoring, score_runs, training_for
from attribution.rollback.selfcal import LABELS_NAME, SELF, labelled_runs, own_labels
from attribution.sources.labelfile import read_labels
from attribution.sources.scorefile import TRAINED_SCORERS, ScoreRecord
from attribution.scorers.crossfit import group_key
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.io import write_json_atomic
from descriptor.layout import ROLLBACK_SWEEP_NAME, RunPaths
from descriptor.records import ROLLBACK_STRATEGIES, RollbackRecord, RollbackSweepRecord
from descriptor.rollback_summary import sweep_rollback
from descriptor.run_files import RunFileError, read_record
from mas.config import ExperimentConfig
from mas.logging import get_logger
from mas.sweep.lock import sweep_lock

log = get_logger(__name__)

SELF_CALIBRATED = ("conformal", "top1")
"""Strategies that need scores, hence a calibration file or labelled failed runs to fit on."""


@dataclass(kw_only=True, frozen=True, slots=True)
class SweepRollbackOptions:
    """``run --rollback`` and its companions."""

    strategy: str
    calibration: str | None = None
    """calibration.json from ``calibrate``; None: calibrate on the sweep's own failed runs (cross-fitted)."""
    scorer: str = "learned"
    """Self-calibration: the trained step scorer (``learned`` or ``position``)."""
    method: str = "auto"
    """Self-calibration: the conformal method (``auto`` chooses among the contiguous ones by inner CV)."""
    alpha: float = 0.1
    """Self-calibration: miscoverage level (target coverage 1 - alpha)."""
    folds: int = 5
    """Self-calibration: outer cross-fitting folds (and the scorer's inner ones)."""
    seed: int = 0
    labels: str | None = None
    """``calibration: self``: labels.jsonl of earlier failures of the system; None: label this sweep's own."""
    label_samples: int = 1
    """``calibration: self`` without ``labels``: replays per probed point when labelling this sweep's failures."""
    note: bool = True
    """Tell the resumed agents of the failure (the rollback note); the sweep's own replay labels follow suit."""

    @property
    def told(self) -> bool:
        """The resumed agents are told of the failure (:func:`~attribution.rollback.restart.tells`)."""
        return tells(self.strategy, self.note)


def _injects(cfg: ExperimentConfig, systems: list[str] | None) -> bool:
    from mas.systems import agent_roles

    inj = cfg.inject
    scripted = any(r.provider == "scripted" for r in cfg.used_routes(agent_roles(systems, cfg)).values())
    return scripted and (inj.rate > 0 or inj.step is not None or inj.agent is not None or inj.position is not None)


def check_options(cfg: ExperimentConfig, opts: SweepRollbackOptions, experiment_root: Path | None = None,
                  systems: list[str] | None = None) -> Calibration | None:
    """Refuse a bad ``--rollback`` setup before any run starts; returns the loaded calibration (if any).

    A sweep already rolled back (an earlier invocation of the same experiment) keeps its strategy and
    calibration: its runs are never rolled back twice, so a different one would mix two strategies.
    """
    if opts.strategy not in ROLLBACK_STRATEGIES:
        raise UserError(f"--rollback: unknown strategy {opts.strategy!r}; expected one of {', '.join(ROLLBACK_STRATEGIES)}")
    earlier = Path(experiment_root) / ROLLBACK_SWEEP_NAME if experiment_root is not None else None
    if earlier is not None and earlier.is_file():
        try:
            prev = read_record(earlier, RollbackSweepRecord)
        except RunFileError as err:
            raise UserError(str(err)) from None
        same_cal = (prev.calibration is None) == (opts.calibration is None) and (
            opts.calibration is None or Path(prev.calibration).resolve() == Path(opts.calibration).resolve())
        prev_told = tells(prev.strategy, prev.note)  # a retry recorded before the field says note: true
        if prev.strategy != opts.strategy or not same_cal or prev_told != opts.told:
            raise UserError(f"{earlier}: this experiment was rolled back with "
                            f"{_flags(prev.strategy, prev.calibration, prev_told)}; {_once(opts)}")
    elif experiment_root is not None:  # an invocation cut short before its record: its runs' rollbacks say how
        for path, rec in _sweep_rollbacks(Path(experiment_root)):
            told = tells(rec.strategy, rec.note is not False)  # None: made before the field, when all but retry told
            if rec.strategy != opts.strategy or told != opts.told:
                raise UserError(f"{path}: an earlier `run --rollback` of this experiment, cut short, rolled this run "
                                f"back with {_flags(rec.strategy, None, told)}; {_once(opts)}")
    if cfg.storage.checkpoints == "none":
        raise UserError("--rollback resumes failed runs from their checkpoints, and storage.checkpoints is 'none'; "
                        "set it to 'failed' (the default) or 'all'")
    if opts.calibration is not None and opts.strategy not in SELF_CALIBRATED:
        raise UserError(f"--calibration is used by --rollback conformal or top1, not by {opts.strategy}")
    if opts.labels is not None and opts.calibration != SELF:
        raise UserError("--rollback-labels: the labels calibrate --calibration self; add it (or drop the labels)")
    if opts.calibration == SELF:
        if opts.labels is not None:
            read_labels(opts.labels, "--rollback-labels")  # a missing or bad file stops here, before any run
        if opts.label_samples < 1:
            raise UserError(f"--rollback-label-samples must be at least 1 (got {opts.label_samples})")
    elif opts.calibration is not None:
        return load_calibration(opts.calibration)
    elif (opts.strategy in SELF_CALIBRATED or opts.strategy == "oracle") and not _injects(cfg, systems):
        raise UserError(f"--rollback {opts.strategy} without --calibration needs the failed runs' decisive steps, "
                        "which only the scripted model's injected errors give (--model scripted --inject-errors "
                        "RATE); pass --calibration FILE (from `calibrate`) for other runs, or --calibration self to "
                        "label the failures by replay")
    if opts.strategy in SELF_CALIBRATED and opts.scorer not in TRAINED_SCORERS:
        raise UserError(f"--rollback-scorer {opts.scorer!r}: self-calibration trains its scorer on the sweep's "
                        f"failed runs; expected one of {', '.join(sorted(TRAINED_SCORERS))}")
    if not 0.0 < opts.alpha < 1.0:
        raise UserError(f"--rollback-alpha must lie strictly between 0 and 1 (got {opts.alpha})")
    if opts.folds < 2:
        raise UserError(f"--rollback-folds must be at least 2 (got {opts.folds})")
    from attribution.conformal import method_names

    if opts.method not in method_names():
        raise UserError(f"--rollback-method: expected one of {', '.join(method_names())}, got {opts.method!r}")
    return None


def _flags(strategy: str, calibration: str | None, told: bool) -> str:
    """The ``run`` flags of a sweep rollback: ``--rollback restart --no-rollback-note``."""
    return (f"--rollback {strategy}{' --calibration ' + calibration if calibration else ''}"
            f"{' --no-rollback-note' if not told and strategy != 'retry' else ''}")


def _once(opts: SweepRollbackOptions) -> str:
    return (f"this invocation asks for {_flags(opts.strategy, opts.calibration, opts.told)}. Each failed run is "
            "rolled back once, so resume it with the same options or use another --experiment-id")


def _sweep_rollbacks(root: Path) -> Iterator[tuple[Path, RollbackRecord]]:
    """The finished sweep rollbacks (:func:`~descriptor.rollback_summary.sweep_rollback`) of the runs under
    ``root``, with each run's path prefix."""
    for result in sorted(root.rglob("run_*.result.json")):
        run = RunPaths.parse(result)
        if run.rollback is None and (rec := sweep_rollback(run)) is not None and rec.status != "error":
            yield run.prefix, rec


def _records(trajs: list[Trajectory], scores: list[Any], scorer: str) -> list[ScoreRecord]:
    return [ScoreRecord(id=t.id, n_steps=t.n_steps, step_scores=s.step_scores, mistake_step=t.mistake_step,
                        mistake_agent=t.mistake_agent, nfe=s.nfe, scorer=scorer) for t, s in zip(trajs, scores)]


async def _scores(scorer: str, targets: list[Trajectory], train: list[Trajectory], opts: SweepRollbackOptions):
    """Scores of ``targets`` by a trained scorer; a target is never scored by a model that saw its question."""
    from attribution.scorers import SCORERS
    from attribution.scorers.base import ScorerContext

    ctx = ScorerContext(train=train, folds=opts.folds, seed=opts.seed, with_ground_truth=False)
    return await SCORERS[scorer]()(targets, ctx)


def fold_of(failed: list[Trajectory], folds: int, seed: int) -> dict[str, int]:
    """Outer fold of every failed run: runs of one question share a fold; seeded, stable across invocations."""
    import random

    groups = sorted({group_key(t) for t in failed})
    random.Random(f"rollback-folds|{seed}").shuffle(groups)
    k = min(folds, len(groups))
    return {t.id: groups.index(group_key(t)) % k for t in failed}


async def self_calibrated_choices(failed: list[Trajectory], todo: list[Trajectory],
                                  opts: SweepRollbackOptions) -> tuple[dict[str, Choice], list[dict[str, Any]]]:
    """Conformal restart choices for ``todo`` from calibrations fitted on the other folds (see the module docstring).

    Scorer fits: for fold ``f``'s calibration, run ``j`` of fold ``g`` is scored by a model trained on the
    folds other than ``f`` and ``g`` (one fit per pair of folds serves both), so no calibration score comes from
    a model that saw ``j`` or any run of ``f``; fold ``f``'s own runs are scored by a model trained on every
    other fold. K(K-1)/2 + K fits for K folds.
    """
    labelled = [t for t in failed if t.mistake_step is not None]
    fold = fold_of(failed, opts.folds, opts.seed)
    k = len(set(fold.values()))
    wanted = sorted({fold[t.id] for t in todo})
    if k < 3 or len({group_key(t) for t in labelled}) < 3:
        raise UserError(f"--rollback {opts.strategy}: too few labelled failed runs to calibrate on "
                        f"({len(labelled)} of {len({group_key(t) for t in labelled})} task(s); self-calibration "
                        "needs three tasks or more, and 10 or more calibration runs per fold for a finite "
                        "threshold at alpha 0.1); run more tasks or pass --calibration FILE")
    cal: dict[int, list[tuple[Trajectory, Any]]] = {f: [] for f in wanted}
    for f, g in ((f, g) for f in range(k) for g in range(f + 1, k) if f in wanted or g in wanted):
        train = [t for t in labelled if fold[t.id] not in (f, g)]
        pair = [t for t in labelled if fold[t.id] in (f, g)]
        for t, sc in zip(pair, await _scores(opts.scorer, pair, train, opts)):
            other = g if fold[t.id] == f else f  # t's scores calibrate the fold it is not in
            if other in cal:
                cal[other].append((t, sc))
    choices: dict[str, Choice] = {}
    info: list[dict[str, Any]] = []
    for f in wanted:
        runs = [t for t, _ in cal[f]]
        fitted = fit(_records(runs, [sc for _, sc in cal[f]], opts.scorer), opts.method, opts.alpha, Aggregator(),
                     opts.seed)
        test = [t for t in todo if fold[t.id] == f]
        train = [t for t in labelled if fold[t.id] != f]
        for t, rec in zip(test, _records(test, await _scores(opts.scorer, test, train, opts), opts.scorer)):
            choices[t.id] = set_choice(predict(fitted, rec).steps, t.n_steps)
        info.append({"fold": f, "runs": [t.id for t in test], "n_calibration": fitted.n,
                     "n_selection": fitted.n_selection, "method": fitted.resolved_method,
                     "q_hat": "inf" if math.isinf(fitted.q_hat) else fitted.q_hat})
    return choices, info


async def earlier_labels_choices(todo: list[Trajectory], labels_path: str | Path,
                                 opts: Any) -> tuple[dict[str, Choice], list[dict[str, Any]]]:
    """Choices for ``todo`` from the earlier failures ``labels_path`` labels: conformal sets calibrated on them, or
    (``top1``) the top step of the scorer trained on them."""
    earlier = labelled_runs(read_labels(labels_path))
    if len({t.id for t in earlier}) < 3:
        raise UserError(f"--rollback-labels {labels_path}: {len(earlier)} labelled run(s); calibration needs three "
                        "or more (label more failures with label-failures)")
    cal_scores = await _scores(opts.scorer, earlier, earlier, opts)  # cross-fitted: none scored by a model that saw it
    fitted = fit(_records(earlier, cal_scores, opts.scorer), opts.method, opts.alpha, Aggregator(), opts.seed)
    scores = await _scores(opts.scorer, todo, training_for(todo, earlier), opts)
    choices = {t.id: choose_restart("top1", rec, None) if opts.strategy == "top1" else
               set_choice(predict(fitted, rec).steps, t.n_steps)
               for t, rec in zip(todo, _records(todo, scores, opts.scorer), strict=True)}
    info = [{"fold": "earlier", "labels": str(Path(labels_path).resolve()), "runs": [t.id for t in todo],
             "n_calibration": fitted.n, "n_selection": fitted.n_selection, "method": fitted.resolved_method,
             "q_hat": "inf" if math.isinf(fitted.q_hat) else fitted.q_hat}]
    return choices, info


async def _choices(failed: list[Trajectory], todo: list[Trajectory], opts: SweepRollbackOptions,
                   calibration: Calibration | None) -> tuple[dict[str, tuple[Choice, int]], list[dict[str, Any]],
                                                              str | None]:
    """Restart choice (and scoring model calls) per run id, the self-calibration folds, and the scorer used."""
    s = opts.strategy
    if s in UNSCORED:
        return ({t.id: (choose_restart(s, None, None, t.mistake_step), 0) for t in todo
                 if s != "oracle" or t.mistake_step is not None}, [], None)
    if calibration is not None:
        setup = resolve_scoring(calibration, uses_calibration=s == "conformal", seed=opts.seed)
        early = await early_stopped_choices(todo, setup, calibration) if s == "conformal" else None
        if early is not None:
            return {t.id: ce for t, ce in zip(todo, early)}, [], setup.scorer
        scores = await score_runs(todo, setup)
        return ({t.id: (choose_restart(s, sc, calibration), sc.nfe or 0) for t, sc in zip(todo, scores)}, [],
                setup.scorer)
    if opts.calibration == SELF and opts.labels is not None:
        choices, info = await earlier_labels_choices(todo, opts.labels, opts)
        return {k: (c, 0) for k, c in choices.items()}, info, opts.scorer
    if s == "top1":
        labelled = [t for t in failed if t.mistake_step is not None]
        scores = await _scores(opts.scorer, todo, labelled, opts)
        recs = _records(todo, scores, opts.scorer)
        return {t.id: (choose_restart("top1", r, None), 0) for t, r in zip(todo, recs)}, [], opts.scorer
    choices, info = await self_calibrated_choices(failed, todo, opts)
    return {k: (c, 0) for k, c in choices.items()}, info, opts.scorer


async def rollback_sweep(experiment_root: str | Path, opts: SweepRollbackOptions, *,
                         calibration: Calibration | None = None, concurrency: int = 4) -> RollbackSweepRecord:
    """Roll back every failed run under ``experiment_root`` once; write ``rollback_sweep.json`` and return it."""
    t0 = time.perf_counter()
    root = Path(experiment_root).resolve()  # records name their runs by path, readable from anywhere
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(t: Trajectory) -> RollbackRecord:
        choice, nfe = choices[t.id]
        async with gate:
            # keep_going: a rollback that cannot start (no checkpoint) is an error entry, and the others go on
            return await rollback_one(t, strategy=opts.strategy, scores=None, calibration=calibration,
                                      scoring_nfe=nfe, choice=choice, origin="sweep", keep_going=True, note=opts.note)

    with sweep_lock(root, root.name):  # no other sweep (or rollback) of this experiment meanwhile
        failed = load_runs_dir(root).trajectories
        # once per run: a run whose sweep rollback ran to its end is done; one that ended in an error is retried
        todo = [t for t in failed if (prev := sweep_rollback(run_of(t))) is None or prev.status == "error"]
        check_configs(todo)
        labelling: dict[str, Any] = {}
        if todo and opts.calibration == SELF and opts.labels is None:  # the sweep's own failures, labelled by replay
            failed, label_tokens = await own_labels(root, failed, opts.label_samples, concurrency, opts.note)
            by_id = {t.id: t for t in failed}
            todo = [by_id[t.id] for t in todo]
            labelling = {"labels": str((root / LABELS_NAME).resolve()), "label_tokens": label_tokens}
        elif opts.labels is not None:
            labelling = {"labels": str(Path(opts.labels).resolve())}
        choices, folds, scorer = await _choices(failed, todo, opts, calibration) if todo else ({}, [], None)
        recs = await asyncio.gather(*(one(t) for t in todo if t.id in choices))
    errors = [f"{r.run}: {r.error}" for r in recs if r.status == "error"]
    for e in errors:
        log.warning("rollback failed", error=e)
    done = [r for r in recs if r.status != "error"]
    record = RollbackSweepRecord(
        strategy=opts.strategy, calibration=opts.calibration if opts.calibration in (None, SELF) else str(
            Path(opts.calibration).resolve()),
        scorer=scorer, method=calibration.method if calibration is not None else (
            opts.method if opts.strategy == "conformal" else None),
        alpha=calibration.alpha if calibration is not None else (opts.alpha if opts.strategy == "conformal" else None),
        note=opts.told, folds=folds, n_failed=len(failed), n_rolled_back=len(done), n_already=len(failed) - len(todo),
        n_errors=len(errors), n_without_choice=len(todo) - len([t for t in todo if t.id in choices]),
        errors=errors[:20], wall_time_s=time.perf_counter() - t0, **labelling,
    )
    write_json_atomic(root / ROLLBACK_SWEEP_NAME, record)
    return record
