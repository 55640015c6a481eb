"""``calibration.json``: writing, reading and predicting with a fitted conformal threshold."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, field_serializer, field_validator

from attribution.conformal._aggregators import INF, Aggregator
from attribution.conformal._calibrate import Fitted, fit, predict
from attribution.conformal._methods import base_methods, method_names
from attribution.sources.labelfile import apply_labels, read_labels
from attribution.sources.scorefile import ScorerFields, common_scorer, fingerprint, read_score_file
from descriptor.errors import UserError
from descriptor.io import write_json_atomic
from descriptor.untrusted import BadJson, parse_json

CALIBRATION_VERSION = 4
"""4: ``lse`` is Eq. 19 as printed (``- log l`` outside the ``1/beta``; the earlier placement is ``lse_inside``).
3: crsvp and lse as the paper writes them (the halving tree, the top-1 leaf not interpolated; the trajectory
length in lse), the released code's as ``crsvp_released`` and ``lse_segment``. 2: crsvp sets are tree nodes,
auto chooses by inner cross-validation on its selection half. Older files that depend on an earlier crsvp or lse
are refused (their q_hat means something else now: a version-3 ``lse`` file only when its beta is not 1, where
both placements agree); other older files read as before."""


def _q_from_json(v: object) -> object:
    return INF if v == "inf" else v


class Calibration(ScorerFields):
    """``calibration.json``: a fitted conformal threshold and how it was made.

    ∞ is written as the string ``"inf"`` (strict JSON has no Infinity). The
    scorer fields say which scorer produced the calibration scores: new runs
    must be scored by it for the guarantee to hold (null in older files).
    """

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """File format version (files without it are version 1)."""
    method: str
    """Requested method (one of vcp, crsvp, lf, rf, twf, trim, grow, band, auto)."""
    resolved_method: str
    """Base method actually used (differs from ``method`` only for auto)."""
    aggregator: str
    """Set-score aggregator of lf/rf/twf/crsvp: sum, max, lse, lse_inside or lse_segment."""
    lam: float
    """max aggregator: weight of the length penalty."""
    beta: float
    """lse aggregator: inverse temperature."""
    alpha: float = Field(gt=0.0, lt=1.0)
    """Miscoverage level; target coverage is 1 - alpha."""
    q_hat: Annotated[float, BeforeValidator(_q_from_json)]
    """Threshold; "inf" in the file means every set is the whole trajectory."""
    n: int = Field(ge=1)
    """Labelled calibration trajectories that set q_hat."""
    n_selection: int = 0
    """auto only: labelled trajectories the method was chosen on (inner cross-validation; disjoint from those n)."""
    n_skipped: int
    """Records skipped because their mistake_step was null."""
    seed: int
    """Seed of crsvp's per-trajectory interpolation draws and of auto's inner splits."""
    twf_fallback: bool = False
    """twf: replace an empty intersection by the top-1 step (beyond the paper; off by default)."""
    fingerprint: str
    """sha256 of the calibration score file's bytes."""
    scores_path: str
    """Score file the threshold was fitted on."""
    auto_rates: dict[str, float] | None = None
    """auto only: mean inner-CV removal rate of each candidate."""
    auto_coverage: dict[str, float] | None = None
    """auto only: mean inner-CV coverage of each candidate."""
    labels_path: str | None = None
    """``labels.jsonl`` of ``label-failures`` whose decisive steps replaced the score file's ``mistake_step``."""

    @property
    def label_files(self) -> list[str]:
        """The ``label-failures`` labels behind this calibration: those of its decisive steps (``calibrate
        --labels``) and those its scorer was trained on (``score-steps --labels``)."""
        train = self.scorer_train.labels if self.scorer_train is not None else None
        return [p for p in (self.labels_path, train) if p]

    @field_validator("q_hat")
    @classmethod
    def _q_not_nan(cls, v: float) -> float:
        if math.isnan(v) or v == -INF:
            raise ValueError('expected a number or "inf"')
        return v

    @field_serializer("q_hat")
    def _q_to_json(self, v: float) -> float | str:
        return "inf" if math.isinf(v) else v

    def fitted(self) -> Fitted:
        """The in-memory form ``predict`` takes."""
        return Fitted(
            method=self.method, resolved_method=self.resolved_method,
            agg=Aggregator(kind=self.aggregator, lam=self.lam, beta=self.beta),
            alpha=self.alpha, q_hat=self.q_hat, n=self.n, n_skipped=self.n_skipped, n_selection=self.n_selection,
            seed=self.seed, twf_fallback=self.twf_fallback, auto_rates=self.auto_rates,
            auto_coverage=self.auto_coverage,
        )


def calibrate_file(
    scores_path: str | Path, method: str, alpha: float, agg: Aggregator, seed: int, out: str | Path,
    twf_fallback: bool = False, labels: str | Path | None = None,
) -> Calibration:
    """Fit on a score file and write ``out`` (calibration.json) atomically, with the file's scorer.

    ``labels`` (``labels.jsonl`` of ``label-failures``): its decisive steps replace the records' ``mistake_step``
    (a record it does not label has none and is skipped).
    """
    by_run = read_labels(labels) if labels is not None else None
    records = read_score_file(scores_path)
    if by_run is not None:
        records = apply_labels(records, by_run, labels)
    info = common_scorer(records, str(scores_path))
    f = fit(records, method, alpha, agg, seed, twf_fallback)
    cal = Calibration(
        version=CALIBRATION_VERSION, method=f.method, resolved_method=f.resolved_method, aggregator=agg.kind,
        lam=agg.lam, beta=agg.beta, alpha=alpha, q_hat=f.q_hat, n=f.n, n_skipped=f.n_skipped,
        n_selection=f.n_selection, seed=seed, twf_fallback=twf_fallback,
        fingerprint=fingerprint(scores_path), scores_path=str(scores_path), auto_rates=f.auto_rates,
        auto_coverage=f.auto_coverage, labels_path=None if labels is None else str(Path(labels).resolve()),
        **info.model_dump(),
    )
    write_json_atomic(out, cal.model_dump(mode="json"))
    return cal


def _check_version(cal: Calibration, path: Path) -> None:
    if cal.version > CALIBRATION_VERSION or cal.version < 1:
        raise UserError(f"{path}: field 'version': expected 1 to {CALIBRATION_VERSION}, got {cal.version}")
    # A version-1 auto file stays valid: its q_hat was fitted for the method it resolved to.
    uses_lse = cal.aggregator == "lse" and cal.resolved_method in ("lf", "rf", "twf", "crsvp")
    old_crsvp = cal.resolved_method == "crsvp" and cal.version < 3
    old_lse = uses_lse and (cal.version < 3 or (cal.version < 4 and cal.beta != 1.0))
    if old_crsvp or old_lse:
        what = "crsvp's chain" if old_crsvp else "the LogSumExp aggregator"
        raise UserError(f"{path}: field 'version': a version-{cal.version} calibration made with an old definition of "
                        f"{what}; its q_hat does not apply to the current one: run calibrate again")


def load_calibration(path: str | Path) -> Calibration:
    """Read calibration.json; bad content raises ``UserError`` naming the field."""
    path = Path(path)
    try:
        obj = parse_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: calibration file not found") from None
    except (OSError, UnicodeDecodeError, BadJson) as err:
        raise UserError(f"{path}: not a readable JSON calibration file ({err})") from None
    try:
        cal = Calibration.model_validate(obj)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "file"
        raise UserError(f"{path}: field '{loc}': {first['msg']}") from None
    if cal.method not in method_names() or cal.resolved_method not in base_methods():
        raise UserError(f"{path}: field 'method': expected one of {', '.join(method_names())}, got {cal.method!r}")
    _check_version(cal, path)
    cal.fitted()  # validates the aggregator fields
    if cal.aggregator in ("sum", "max") and cal.q_hat < 0 and cal.resolved_method in ("lf", "rf", "twf", "crsvp"):
        # a sum or max of non-negative step scores is never negative: such a threshold leaves every set empty
        raise UserError(f"{path}: field 'q_hat': a {cal.aggregator} of step scores is never negative, got {cal.q_hat}")
    return cal


def predict_file(calibration_path: str | Path, scores_path: str | Path) -> list[dict]:
    """Per-record sets for a score file, as JSON-ready rows.

    ``covered`` is true/false when the record has a mistake_step, else null.
    """
    cal = load_calibration(calibration_path)
    fitted = cal.fitted()
    records = read_score_file(scores_path)
    made, fitted_on = common_scorer(records, str(scores_path)), cal.scorer_info()
    if made.known and fitted_on.known and made.scorer != fitted_on.scorer:  # as rollback refuses it
        raise UserError(f"{scores_path}: scores of the {made.scorer!r} scorer, and {calibration_path} was fitted on "
                        f"scores of the {fitted_on.scorer!r} scorer: its sets would have no coverage guarantee "
                        f"(score the runs with `score-steps --scorer {fitted_on.scorer}`)")
    rows = []
    for rec in records:
        ps = predict(fitted, rec)
        rows.append({
            "id": rec.id, "n_steps": rec.n_steps, "set": list(ps.steps), "set_size": len(ps.steps),
            "restart_step": min(ps.steps) if ps.steps else None, "nfe": ps.nfe,
            "fallback": ps.fallback, "method": fitted.resolved_method,
            "q_hat": "inf" if math.isinf(fitted.q_hat) else fitted.q_hat,
            "covered": None if rec.mistake_step is None else rec.mistake_step in ps.steps,
        })
    return rows
