"""Step-score files: the JSONL format ``score-steps`` writes and conformal prediction reads.

One JSON object per line::

    {"id": "ag-12", "n_steps": 4, "step_scores": [0.1, 0.7, 0.1, 0.1],
     "mistake_step": 1, "mistake_agent": "Coder", "nfe": 4}

Steps are 0-indexed. ``step_scores[i]`` is the scorer's likelihood in [0, 1]
that step ``i`` is the decisive error. ``mistake_step`` is null for runs whose
decisive step is unknown (new failed runs); such records can be predicted on
but are skipped for calibration and evaluation. Extra keys are kept.

Rows written by ``score-steps`` also say which scorer produced them
(``scorer``, ``scorer_route``, ``scorer_with_ground_truth``) and, for trained
scorers, what it was trained on (``scorer_train``): a calibration is only
valid for scores from the same scorer, so ``calibrate`` copies these fields
into calibration.json and ``rollback`` checks them. Files without them (older
ones, or written by others) still read; the fields are then null.

Also holds the small atomic-write helpers the conformal commands use
(``descriptor.io`` did not exist when this was written).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_serializer, model_validator

from descriptor.errors import UserError
from descriptor.untrusted import BadJson, parse_json


TRAINED_SCORERS = frozenset({"position", "learned"})
"""Scorers fitted on labelled failures: their scores depend on the training data, so it is recorded."""


class TrainSource(BaseModel):
    """The labelled failures a trained scorer was fitted on (directories as absolute paths).

    ``data_dir``/``runs_dir``/``subset``/``max_cases`` are the scored source
    itself (trained scorers are cross-fitted on it), ``train_dir`` the extra
    training data (``score-steps --train-dir``).
    """

    model_config = ConfigDict(frozen=True)

    data_dir: str | None = None
    runs_dir: str | None = None
    spans: str | None = None
    """OpenTelemetry span file or directory (``--spans``)."""
    subset: str = "all"
    max_cases: int | None = None
    train_dir: str | None = None
    labels: str | None = None
    """``labels.jsonl`` whose decisive steps label the scored source (``score-steps --labels``)."""

    @model_serializer(mode="wrap")
    def _without_null_labels(self, handler):  # files made without labels stay as they were
        data = handler(self)
        if data.get("labels") is None:
            data.pop("labels", None)
        return data

    def describe(self) -> str:
        """Short human-readable form for messages."""
        parts = [f"--{k.replace('_', '-')} {v}" for k, v in
                 (("data_dir", self.data_dir), ("runs_dir", self.runs_dir), ("spans", self.spans),
                  ("train_dir", self.train_dir), ("labels", self.labels)) if v]
        return " ".join(parts) or "nothing"


class ScorerFields(BaseModel):
    """The scorer provenance fields that score records, calibrations and :class:`ScorerInfo` share."""

    scorer: str | None = None
    """Scorer name (``score-steps --scorer``); null in files that do not record it."""
    scorer_route: str | None = None
    """Model route of an LLM scorer (``--model``); null for scorers without a model."""
    scorer_with_ground_truth: bool | None = None
    """Whether the scorer was allowed to see the reference answer."""
    scorer_train: TrainSource | None = None
    """What a trained scorer (position, learned) was fitted on; null for untrained scorers."""

    def scorer_info(self) -> ScorerInfo:
        """These fields alone (all null when not recorded)."""
        return ScorerInfo(**{k: getattr(self, k) for k in SCORER_FIELDS})


class ScorerInfo(ScorerFields):
    """Which scorer produced a set of step scores, and how (all null: not recorded)."""

    model_config = ConfigDict(frozen=True)

    @property
    def known(self) -> bool:
        return self.scorer is not None


SCORER_FIELDS: tuple[str, ...] = tuple(ScorerFields.model_fields)


class ScoreRecord(ScorerFields):
    """One line of a score file: per-step error likelihoods of one failed trajectory."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1)
    """Trajectory id, unique within the file."""
    n_steps: StrictInt = Field(ge=1)
    """Number of trajectory steps (ℓ)."""
    step_scores: list[float]
    """Likelihood in [0, 1] that each step is the decisive error; length ``n_steps``."""
    mistake_step: StrictInt | None = None
    """0-indexed decisive error step, or null when unknown."""
    mistake_agent: str | None = None
    """Agent responsible for the decisive error, when known."""
    nfe: StrictInt | None = None
    """Scorer model calls spent on this trajectory, when the scorer reports it."""

    @model_validator(mode="after")
    def _check_consistency(self) -> "ScoreRecord":
        if len(self.step_scores) != self.n_steps:
            raise ValueError(
                f"step_scores: expected {self.n_steps} values (n_steps), got {len(self.step_scores)}"
            )
        for i, s in enumerate(self.step_scores):
            if not (math.isfinite(s) and 0.0 <= s <= 1.0):
                raise ValueError(f"step_scores[{i}]: expected a number in [0, 1], got {s!r}")
        if self.mistake_step is not None and not 0 <= self.mistake_step < self.n_steps:
            raise ValueError(
                f"mistake_step: expected an integer in [0, {self.n_steps - 1}] or null, "
                f"got {self.mistake_step}"
            )
        return self


def _describe(err: ValidationError) -> str:
    """First validation error as 'field: message' (pydantic's own text is long)."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "record"
    msg = first["msg"].removeprefix("Value error, ")
    return f"field '{loc}': {msg}" if not msg.startswith(loc) else msg


def parse_score_lines(lines: list[str], source: str) -> list[ScoreRecord]:
    """Parse score-file lines; ``source`` names the file in error messages.

    Raises ``UserError`` naming file, line and field on the first bad line,
    and on duplicate ids or a file without records.
    """
    records: list[ScoreRecord] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line)
        except BadJson as err:
            raise UserError(f"{source} line {lineno}: not valid JSON ({err})") from None
        if not isinstance(obj, dict):
            raise UserError(f"{source} line {lineno}: expected a JSON object, got {type(obj).__name__}")
        try:
            rec = ScoreRecord.model_validate(obj)
        except ValidationError as err:
            raise UserError(f"{source} line {lineno}: {_describe(err)}") from None
        if rec.id in seen:
            raise UserError(
                f"{source} line {lineno}: field 'id': duplicate id {rec.id!r} (first on line {seen[rec.id]})"
            )
        seen[rec.id] = lineno
        records.append(rec)
    if not records:
        raise UserError(f"{source}: no score records (expected one JSON object per line)")
    return records


def read_score_file(path: str | Path) -> list[ScoreRecord]:
    """Read and validate a score file; bad input raises ``UserError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: score file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read score file ({err})") from None
    return parse_score_lines(text.splitlines(), str(path))


def common_scorer(records: list[ScoreRecord], source: str) -> ScorerInfo:
    """The one scorer provenance all ``records`` share; a file mixing scorers is a ``UserError``.

    A calibration over scores of different scorers has no single scorer to
    predict with, so its guarantee would hold for none of them.
    """
    infos = {r.scorer_info() for r in records}
    if len(infos) > 1:
        names = sorted({i.scorer or "unrecorded" for i in infos})
        raise UserError(f"{source}: records come from different scorers or training data ({', '.join(names)}); "
                        "calibrate on scores of one scorer")
    return next(iter(infos), ScorerInfo())


def fingerprint(path: str | Path) -> str:
    """``sha256:<hex>`` of the file's bytes: identifies the exact data a calibration used."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return f"sha256:{digest}"


def labelled(records: list[ScoreRecord]) -> tuple[list[ScoreRecord], int]:
    """Records with a known ``mistake_step``, and how many were skipped for lacking one."""
    kept = [r for r in records if r.mistake_step is not None]
    return kept, len(records) - len(kept)
