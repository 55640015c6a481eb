"""Conformal prediction sets of trajectory steps that hold the decisive error.

Every method reduces to *per-step inclusion thresholds* ``h``: for a
trajectory with step scores ``s`` (likelihoods in [0, 1]), step ``i`` is in
the prediction set iff ``h[i] <= q_hat``, and the calibration
(nonconformity) score of a trajectory whose decisive step is ``e`` is
``h[e]``. So the decisive step is in the set exactly when its score is at
most ``q_hat``: that equivalence, with ``<=`` on both sides, is what carries
the split-conformal guarantee (coverage >= 1 - alpha for exchangeable
records) through ties. A method's sets are contiguous when its ``h`` is
quasi-convex along the trajectory (falls, then rises).

- The paper's methods (:mod:`._paper`): ``vcp`` (not contiguous), ``lf``,
  ``rf``, ``twf``, ``crsvp`` (tree nodes; ``crsvp_released`` as the
  authors' released code builds them), with the set scores of
  :mod:`._aggregators` (``sum``, ``max``, ``lse`` as Eq. 19 prints it;
  ``lse_inside`` and ``lse_segment`` as the released code normalises it).
- Contiguous families beyond the paper, for a sharp scorer
  (:mod:`._contiguous`): ``trim`` (density peeling), ``grow`` (interval grown
  from the most likely step), ``band`` (central band of the scores' CDF),
  each with its validity sketch.
- ``auto`` (:mod:`._calibrate`): chooses among the contiguous methods by
  inner cross-validation on half of the calibration records and fits q_hat
  on the other half (exact coverage).
- The name -> threshold rule table (:mod:`._methods`): :data:`CONFORMAL_METHODS`, one registry for the
  built-in methods, installed packages' (``mas_econ.conformal``) and plugins'.
- Files (:mod:`._files`): ``calibration.json`` and ``predict-set`` rows.

Threshold: q_hat = the ``ceil((n+1)(1-alpha))``-th smallest calibration
score, inf when that rank exceeds n (every set is then the whole trajectory).
"""

from attribution.conformal._aggregators import (
    AGGREGATORS,
    DEFAULT_BETA,
    DEFAULT_LAM,
    INF,
    Aggregator,
    lse_normalised,
    prefix_scores,
    segment_score,
    suffix_scores,
)
from attribution.conformal._calibrate import (
    AUTO_CANDIDATES,
    AUTO_INNER_SPLITS,
    AUTO_MIN_RECORDS,
    BASE_METHODS,
    METHODS,
    Fitted,
    auto_halves,
    choose_method,
    conformal_quantile,
    coverage_guard,
    fit,
    inner_splits,
    nonconformity,
    pick,
    predict,
    prediction_set,
    rank_for,
    record_u,
    removal_rate,
    step_thresholds,
)
from attribution.conformal._contiguous import (
    CONTIGUOUS_METHODS,
    band_thresholds,
    grow_order,
    grow_thresholds,
    step_distribution,
    trim_densities,
    trim_thresholds,
)
from attribution.conformal._methods import CONFORMAL_METHODS, ThresholdRule, base_methods, method_names
from attribution.conformal._files import CALIBRATION_VERSION, Calibration, calibrate_file, load_calibration, predict_file
from attribution.conformal._paper import (
    CRSVP_VARIANTS,
    PAPER_METHODS,
    PredictionSet,
    crsvp_levels,
    crsvp_thresholds,
    filtration_nfe,
    first_argmax,
    halving_path,
    lazy_filtration_set,
    paper_rank,
    tree_path,
)

__all__ = [
    "AGGREGATORS",
    "AUTO_CANDIDATES",
    "AUTO_INNER_SPLITS",
    "AUTO_MIN_RECORDS",
    "BASE_METHODS",
    "CALIBRATION_VERSION",
    "CONFORMAL_METHODS",
    "CONTIGUOUS_METHODS",
    "CRSVP_VARIANTS",
    "DEFAULT_BETA",
    "DEFAULT_LAM",
    "INF",
    "METHODS",
    "PAPER_METHODS",
    "Aggregator",
    "Calibration",
    "Fitted",
    "ThresholdRule",
    "PredictionSet",
    "auto_halves",
    "band_thresholds",
    "base_methods",
    "calibrate_file",
    "choose_method",
    "conformal_quantile",
    "coverage_guard",
    "crsvp_levels",
    "crsvp_thresholds",
    "filtration_nfe",
    "first_argmax",
    "fit",
    "grow_order",
    "grow_thresholds",
    "halving_path",
    "inner_splits",
    "lazy_filtration_set",
    "load_calibration",
    "lse_normalised",
    "method_names",
    "paper_rank",
    "nonconformity",
    "pick",
    "predict",
    "predict_file",
    "prediction_set",
    "prefix_scores",
    "rank_for",
    "record_u",
    "removal_rate",
    "segment_score",
    "step_distribution",
    "step_thresholds",
    "suffix_scores",
    "tree_path",
    "trim_densities",
    "trim_thresholds",
]
