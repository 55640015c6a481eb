"""The ``attribute`` and ``score-steps`` jobs: load, run, measure, write (atomically).

Each job is one pydantic options object and one function, called by the CLI
and by tests alike.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from attribution.llm.calls import server_tokenizer
from attribution.evaluate import CaseRecord, attribute_all, attribution_metrics, scorer_metrics
from attribution.sources.labelfile import apply_labels, read_labels
from attribution.sources.loaders import LoadResult, load_train_dir, load_trajectories
from attribution.sources.scorefile import TRAINED_SCORERS, ScorerInfo, TrainSource
from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.io import read_json, write_json_atomic, write_text_atomic
from descriptor.outputs import OutputKind
from descriptor.redact import may_hold_secret, redact
from descriptor.untrusted import parse_json
from mas.logging import get_logger

log = get_logger(__name__)


class SourceOptions(BaseModel):
    """Where the trajectories come from, and how many."""

    data_dir: str | None = None
    """Who&When directory (holding ``algorithm_generated``/``hand_crafted``, or one of them)."""
    runs_dir: str | None = None
    """This project's runs (an experiment root or a task directory); failed runs are loaded."""
    spans: str | None = None
    """OpenTelemetry spans of failed runs of any agent program: a file or a directory of files."""
    subset: Literal["algorithm_generated", "hand_crafted", "all"] = "all"
    max_cases: int | None = Field(default=None, ge=1)
    """Keep the first N cases of each subset (file order), for quick runs."""
    labels: str | None = None
    """``labels.jsonl`` of ``label-failures``: its decisive steps replace the runs' labels (``--runs-dir`` only)."""


class ModelOptions(BaseModel):
    model: str | None = None
    """Route name (``embedded``, ``scripted`` or one under ``[models]`` of ``config``); None: no model."""
    config: str | None = None
    """Experiment TOML holding the routes; None: built-in defaults."""
    seed: int = 0
    with_ground_truth: bool = True
    concurrency: int = Field(default=4, ge=1)
    """Cases (or trajectories) processed at once."""


class AttributeJob(SourceOptions, ModelOptions):
    method: str
    out: str
    """Output directory: ``predictions.jsonl`` and ``results.json``."""
    method_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword options of the method's factory (``--method-option KEY=VALUE``), e.g. ``vote`` for ``echo``."""


class ScoreJob(SourceOptions, ModelOptions):
    scorer: str
    out: str
    """Score file (JSONL); metrics go to ``<out>.metrics.json``."""
    train_dir: str | None = None
    """Extra labelled trajectories to train on (Who&When dir or runs dir); never scored."""
    folds: int = Field(default=5, ge=2)


def load_source(opts: SourceOptions) -> LoadResult:
    """Trajectories of the job, cut to ``max_cases`` per subset."""
    if opts.labels is not None and opts.runs_dir is None:
        raise UserError("--labels: counterfactual labels are of this project's runs; use it with --runs-dir")
    by_run = read_labels(opts.labels) if opts.labels is not None else None
    loaded = load_trajectories(data_dir=opts.data_dir, runs_dir=opts.runs_dir, spans=opts.spans, subset=opts.subset)
    trajs = loaded.trajectories if by_run is None else apply_labels(loaded.trajectories, by_run, opts.labels)
    if opts.max_cases is not None:
        kept: list[Trajectory] = []
        per: dict[str, int] = {}
        for t in trajs:
            per[t.subset] = per.get(t.subset, 0) + 1
            if per[t.subset] <= opts.max_cases:
                kept.append(t)
        trajs = kept
    if not trajs:
        raise UserError(f"no trajectories found in {opts.data_dir or opts.runs_dir or opts.spans}")
    return LoadResult(trajectories=trajs, skipped=loaded.skipped)


def _abspath(path: str | None) -> str | None:
    # Absolute, so a calibration made from these scores finds the training data from any directory.
    return None if path is None else str(Path(path).resolve())


def scorer_info(job: ScoreJob) -> ScorerInfo:
    """What produced the job's scores: written to every score row, and copied into calibration.json."""
    train = None
    if job.scorer in TRAINED_SCORERS:
        # Cross-fitting trains on the scored source itself, plus --train-dir.
        train = TrainSource(data_dir=_abspath(job.data_dir), runs_dir=_abspath(job.runs_dir),
                            spans=_abspath(job.spans), subset=job.subset,
                            max_cases=job.max_cases, train_dir=_abspath(job.train_dir),
                            labels=_abspath(job.labels))
    # Trained scorers never see the reference answer, so the setting is recorded only where it matters.
    gt = None if job.scorer in TRAINED_SCORERS else job.with_ground_truth
    return ScorerInfo(scorer=job.scorer, scorer_route=job.model, scorer_with_ground_truth=gt, scorer_train=train)


def load_train_source(src: TrainSource) -> list[Trajectory]:
    """The labelled failures ``src`` names (the scored source and its ``train_dir``), loaded again."""
    trajs: list[Trajectory] = []
    if src.data_dir or src.runs_dir or src.spans:
        opts = SourceOptions(data_dir=src.data_dir, runs_dir=src.runs_dir, spans=src.spans,
                             subset=src.subset, max_cases=src.max_cases, labels=src.labels)  # type: ignore[arg-type]
        trajs += load_source(opts).trajectories
    if src.train_dir:
        trajs += load_train_dir(src.train_dir).trajectories
    return trajs


def open_model(opts: ModelOptions) -> tuple[Any, dict[str, Any]]:
    """``(BoundModel or None, route facts)`` for ``opts.model`` via ``mas.llm.models.make_chat_model``."""
    if opts.model is None:
        return None, {"route": None, "context_window": 8192, "max_output_tokens": 512, "model_label": None,
                      "count_tokens": None}
    from mas.config import load_config
    from mas.llm.models import make_chat_model

    cfg = load_config(opts.config)
    bound = make_chat_model(cfg, opts.model, seed=opts.seed)
    return bound, {"route": opts.model, "context_window": bound.route.context_window,
                         "max_output_tokens": bound.route.max_tokens, "model_label": bound.model_label,
                         "count_tokens": server_tokenizer(bound)}


def _source_record(opts: SourceOptions, loaded: LoadResult) -> dict[str, Any]:
    return {"data_dir": opts.data_dir, "runs_dir": opts.runs_dir, "spans": opts.spans, "subset": opts.subset,
            "max_cases": opts.max_cases, "skipped_files": [s.model_dump() for s in loaded.skipped]}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _progress_bar(total: int, label: str) -> Any:
    try:
        from tqdm import tqdm
    except ModuleNotFoundError:  # progress is optional
        return None
    return tqdm(total=total, desc=label, unit="case", leave=False, disable=None)


PARTIAL = "predictions.partial.jsonl"
ATTRIBUTE_OUT = OutputKind("attribution output directory",
                           files=("predictions.jsonl", "results.json", "settings.json", PARTIAL))
"""What ``attribute --out`` is: a directory it writes these files into (an earlier one is resumed)."""
SCORE_FILE = OutputKind("score file", keys=frozenset({"id", "step_scores"}), lines=True)
"""What ``score-steps --out`` writes: one JSON object a trajectory, with its ``step_scores``."""
SCORE_METRICS = OutputKind("score-steps metrics file")
"""Finished cases of an unfinished ``attribute`` run, one line each, appended as they finish."""

def _settings(job: AttributeJob | ScoreJob, facts: dict[str, Any], method: Any = None) -> dict[str, Any]:
    """What a resumed run must share with the cases it keeps (``max_cases`` and ``concurrency`` may change).

    A method that states its settings (``run.settings``: ECHO's vote, CHIEF's
    graph) adds them as ``method_settings``, so cases made under another
    setting (or by code before it existed) are never mixed into one run.
    """
    what = {"method": job.method} if isinstance(job, AttributeJob) else {"scorer": job.scorer}
    if getattr(method, "settings", None) is not None:
        what["method_settings"] = dict(method.settings)
    return {**what, "route": facts["route"], "model": facts["model_label"],
            "with_ground_truth": job.with_ground_truth, "seed": job.seed, "data_dir": _abspath(job.data_dir),
            "runs_dir": _abspath(job.runs_dir), "spans": _abspath(job.spans), "subset": job.subset,
            **({"labels": _abspath(job.labels)} if job.labels else {})}  # absent without: older files still resume


def _read_lines(path: Path, parse: Callable[[str], Any]) -> list[Any]:
    """``parse`` of every line of a JSONL file (none when it is missing); a line cut off by a crash, or
    otherwise unreadable, is skipped with a warning."""
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        try:
            out.append(parse(line))
        except (ValueError, KeyError, TypeError):
            log.warning("skipping an unreadable line", path=str(path), line=n)
    return out


def _read_records(path: Path) -> list[CaseRecord]:
    """Records of a predictions file."""
    return _read_lines(path, CaseRecord.model_validate_json)


def resumable_records(out: Path, settings: dict[str, Any]) -> dict[str, CaseRecord]:
    """Finished cases already in ``out`` (from ``predictions.jsonl`` and the partial file), by case id.

    Kept only when ``out`` was written with the same settings (:func:`_settings`)
    (read from ``settings.json``, or ``results.json`` of a finished run);
    otherwise a :class:`UserError` names the differing setting. Cases that
    ended in an error are dropped, so they are tried again.
    """
    records = [*_read_records(out / "predictions.jsonl"), *_read_records(out / PARTIAL)]
    if not records:  # nothing to keep (e.g. the last attempt stopped before its first case): start afresh
        return {}
    check_settings(out, [out / "settings.json", out / "results.json"], settings)
    return {r.id: r for r in records if r.error is None}


def check_settings(out: Path, saved_in: list[Path], settings: dict[str, Any]) -> None:
    """Raise a :class:`UserError` unless the first existing file of ``saved_in`` holds ``settings``.

    Directories are compared as absolute paths; the message names the first
    setting that differs.
    """
    path = next((p for p in saved_in if p.is_file()), None)
    if path is None:
        raise UserError(f"{out}: holds finished cases but no {' or '.join(p.name for p in saved_in)} to check "
                        "them against; use another --out")
    saved = read_json(path)
    if not isinstance(saved, dict):
        raise UserError(f"{path}: expected a JSON object of settings, got {type(saved).__name__}; use another --out")
    for key, new in settings.items():
        old = saved.get(key)
        if key.endswith("_dir") and old is not None:
            old = _abspath(old)
        if old != new:
            raise UserError(f"{out}: was written with {key}={old!r}, this run has {key}={new!r}; "
                            "use another --out to keep both, or delete it to start over")


class PartialFile:
    """Appends finished cases to a partial file as they finish, flushed line by line.

    The settings are written beside it just before the first line, so a run
    that finishes no case (bad input, no model) leaves no file behind.
    """

    def __init__(self, path: Path, settings_path: Path, settings: dict[str, Any]) -> None:
        self.path, self.settings_path, self.settings = path, settings_path, settings
        self._fh: Any = None

    def append(self, line: str) -> None:
        """Append one JSON line (secrets redacted, as :mod:`descriptor.io` does for whole files)."""
        if self._fh is None:
            write_json_atomic(self.settings_path, self.settings)
            self._fh = self.path.open("a", encoding="utf-8")
        if may_hold_secret(line):
            line = json.dumps(redact(json.loads(line)), ensure_ascii=False)
        self._fh.write(line + "\n")
        self._fh.flush()

    def __enter__(self) -> PartialFile:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()


def build_method(name: str, options: dict[str, Any]) -> Any:
    """Method ``name`` built with ``options``; a bad option is a :class:`UserError` naming it."""
    from attribution.methods import get_method

    try:
        return get_method(name, **options)
    except (TypeError, ValueError) as err:
        raise UserError(f"--method-option for {name}: {err}") from None


def run_attribute_job(job: AttributeJob) -> dict[str, Any]:
    """Run ``job.method`` on every case; write ``predictions.jsonl`` and ``results.json``; return the results.

    Resumable: each finished case is appended to ``predictions.partial.jsonl``
    at once, and a later run with the same settings (and ``--out``) keeps the
    finished cases and runs only the rest, so an interrupted evaluation (or
    a larger ``--max-cases``) never redoes work.
    """
    from attribution.methods.base import MethodContext

    method = build_method(job.method, job.method_options)
    loaded = load_source(job)
    # A method built from some records (CHIEF's exemplar pool) is never evaluated on them.
    is_training = getattr(method, "is_training_record", None)
    excluded = [t.id for t in loaded.trajectories if is_training is not None and is_training(t)]
    if excluded:
        kept = [t for t in loaded.trajectories if t.id not in set(excluded)]
        if not kept:
            raise UserError(f"every trajectory in {job.data_dir or job.runs_dir} is one {job.method} was built from")
        loaded = LoadResult(trajectories=kept, skipped=loaded.skipped)
    model, facts = open_model(job)
    out = Path(job.out)
    settings = _settings(job, facts, method)
    done = resumable_records(out, settings)
    todo = [t for t in loaded.trajectories if t.id not in done]
    ctx = MethodContext(model=model, route=facts["route"], context_window=facts["context_window"],
                        count_tokens=facts["count_tokens"],
                        max_output_tokens=facts["max_output_tokens"], with_ground_truth=job.with_ground_truth,
                        seed=job.seed)
    bar = _progress_bar(len(todo), job.method)
    start = time.perf_counter()
    with PartialFile(out / PARTIAL, out / "settings.json", settings) as partial:
        def finished(rec: CaseRecord) -> None:
            partial.append(_prediction_line(rec))
            if bar is not None:
                bar.update(1)

        fresh = asyncio.run(attribute_all(method, todo, ctx, concurrency=job.concurrency, progress=finished))
    wall = time.perf_counter() - start
    if bar is not None:
        bar.close()
    by_id = {**done, **{r.id: r for r in fresh}}
    records = [by_id[t.id] for t in loaded.trajectories]
    results = {
        **settings, "context_window": facts["context_window"], "date": _now(), "wall_seconds": wall,
        "n_cases": len(records), "n_resumed": len(records) - len(fresh), **_source_record(job, loaded),
        "excluded_training_records": excluded,
        "metrics": attribution_metrics(records),
    }
    write_text_atomic(out / "predictions.jsonl", "".join(_prediction_line(r) + "\n" for r in records))
    write_json_atomic(out / "results.json", results)
    (out / PARTIAL).unlink(missing_ok=True)
    return results


def _prediction_line(r: CaseRecord) -> str:
    return json.dumps(r.model_dump(mode="json"), ensure_ascii=False)


def _score_row(r: Any, t: Trajectory, info: dict[str, Any]) -> dict[str, Any]:
    """One line of the score file (see the ``score-steps`` help)."""
    row = {"id": r.id, "n_steps": r.n_steps, "step_scores": r.step_scores, "mistake_step": t.mistake_step,
           "mistake_agent": t.mistake_agent, "nfe": r.nfe, "subset": t.subset, "tokens": r.tokens,
           "seconds": r.seconds, **info}
    if "raw_scores" in r.details:
        row["raw_scores"] = r.details["raw_scores"]
    if "fold" in r.details:
        row["fold"] = r.details["fold"]
    return row


def _read_scores(path: Path) -> list[Any]:
    """``StepScores`` of a score file's lines."""
    from attribution.scorers.base import StepScores

    def parse(line: str) -> StepScores:
        row = parse_json(line)
        return StepScores(id=row["id"], n_steps=row["n_steps"], step_scores=row["step_scores"],
                          nfe=row.get("nfe", 0), tokens=row.get("tokens", 0), seconds=row.get("seconds", 0.0))

    return _read_lines(path, parse)


def _score_resumable(job: ScoreJob, scorer: Any, trajectories: list[Trajectory], ctx: Any,
                     settings: dict[str, Any], info: dict[str, Any]) -> tuple[list[Any], int]:
    """Score per trajectory, appending each row to ``<out>.partial.jsonl``; keep rows an earlier run finished.

    Returns the scores in input order and how many were kept.
    """
    out, partial = Path(job.out), Path(f"{job.out}.partial.jsonl")
    kept = [*_read_scores(out), *_read_scores(partial)]
    if kept:
        check_settings(out, [Path(f"{job.out}.settings.json"), Path(f"{job.out}.metrics.json")], settings)
    done = {r.id: r for r in kept}
    todo = [t for t in trajectories if t.id not in done]

    async def score_all(fh: PartialFile) -> list[Any]:
        gate = asyncio.Semaphore(job.concurrency)

        async def one(t: Trajectory) -> Any:
            async with gate:
                r = (await scorer([t], ctx))[0]
            fh.append(json.dumps(_score_row(r, t, info), ensure_ascii=False))
            return r

        return list(await asyncio.gather(*(one(t) for t in todo)))

    with PartialFile(partial, Path(f"{job.out}.settings.json"), settings) as fh:
        fresh = asyncio.run(score_all(fh))
    merged = {**done, **{r.id: r for r in fresh}}
    return [merged[t.id] for t in trajectories], len(trajectories) - len(fresh)


def run_score_job(job: ScoreJob) -> dict[str, Any]:
    """Score every step of every case; write the score file and ``<out>.metrics.json``; return the metrics.

    Model-based scorers are resumable like ``attribute``: each scored
    trajectory is appended to ``<out>.partial.jsonl`` at once, and the same
    command keeps what an interrupted run finished. Trained scorers are
    cross-fitted over all records together (seconds), so they always start afresh.
    """
    from attribution.scorers import get_scorer
    from attribution.scorers.base import ScorerContext

    scorer = get_scorer(job.scorer)
    loaded = load_source(job)
    train = load_train_dir(job.train_dir).trajectories if job.train_dir else []
    model, facts = open_model(job)
    ctx = ScorerContext(model=model, route=facts["route"], context_window=facts["context_window"],
                        count_tokens=facts["count_tokens"],
                        max_output_tokens=facts["max_output_tokens"], with_ground_truth=job.with_ground_truth,
                        seed=job.seed, folds=job.folds, train=train, concurrency=job.concurrency)
    info = scorer_info(job).model_dump(mode="json")
    settings = _settings(job, facts)
    start = time.perf_counter()
    if job.scorer in TRAINED_SCORERS:
        results, n_resumed = asyncio.run(scorer(loaded.trajectories, ctx)), 0
    else:
        results, n_resumed = _score_resumable(job, scorer, loaded.trajectories, ctx, settings, info)
    wall = time.perf_counter() - start
    by_id = {t.id: t for t in loaded.trajectories}
    lines = [json.dumps(_score_row(r, by_id[r.id], info), ensure_ascii=False) + "\n" for r in results]
    summary = {
        **settings, **info, "folds": job.folds, "train_dir": job.train_dir, "n_train_extra": len(train),
        "date": _now(), "wall_seconds": wall, "n_cases": len(results), "n_resumed": n_resumed,
        **_source_record(job, loaded), "metrics": scorer_metrics(results, loaded.trajectories),
    }
    write_text_atomic(job.out, "".join(lines))
    write_json_atomic(f"{job.out}.metrics.json", summary)
    Path(f"{job.out}.partial.jsonl").unlink(missing_ok=True)
    return summary
