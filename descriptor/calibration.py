"""Calibration error of the confidences answers state: BrowseComp's (Humanity's Last Exam's) binned RMS error.

A benchmark that reads a confidence out of each answer puts it in the evaluation's details
(``details["confidence"]``, a fraction in [0, 1]; BrowseComp does). The task descriptor then lists each
run's ``[confidence, success]`` under :data:`PAIRS_KEY` (absent for other benchmarks), and a system's
roll-up reports ``calibration_error`` over all its runs (blank without confidences).

The error (HLE's ``calib_err``, which BrowseComp reports): runs sorted by confidence are cut into bins of
``bin_size`` (100) consecutive runs, the last bin taking the remainder; each bin contributes its share of
runs times the squared gap between its mean confidence and its accuracy; the error is the square root of
the sum, in [0, 1] (HLE prints it times 100). Two deliberate differences: HLE's loop skips the last bin
(``range(len(bins) - 1)``), so it reports 0 for fewer than 200 answers and fails for fewer than 100; we
count every bin, and fewer than ``bin_size`` runs make one bin. Ties in confidence keep run order.

>>> calibration_error([0.9, 0.9, 0.5, 0.5], [True, True, True, False])  # one bin: |0.7 - 0.75|
0.05
>>> calibration_error([0.9, 0.9, 0.5, 0.5], [True, True, True, False], bin_size=2)  # sqrt(0.5 * 0.1 ** 2)
0.070710678119
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

PAIRS_KEY = "confidence_correct"
"""Task descriptor key: ``[[confidence, success], ...]`` per run, in run order."""
BIN_SIZE = 100
"""Runs per bin (HLE's ``beta``)."""


def calibration_error(confidence: Sequence[float], correct: Sequence[bool], bin_size: int = BIN_SIZE) -> float | None:
    """The binned RMS calibration error (see the module docstring); None without runs."""
    if len(confidence) != len(correct):
        raise ValueError(f"{len(confidence)} confidences but {len(correct)} outcomes")
    n = len(confidence)
    if n == 0:
        return None
    order = sorted(range(n), key=lambda i: confidence[i])
    n_bins = max(n // bin_size, 1)
    total = 0.0
    for k in range(n_bins):
        members = order[k * bin_size:(k + 1) * bin_size if k + 1 < n_bins else n]
        gap = (sum(confidence[i] for i in members) - sum(bool(correct[i]) for i in members)) / len(members)
        total += len(members) / n * gap * gap
    return round(math.sqrt(total), 12)


def run_pairs(details: Iterable[tuple[dict[str, Any], bool]]) -> list[list[Any]] | None:
    """``[confidence, success]`` of the runs whose evaluation details state a numeric confidence; None when
    none does (the benchmark reads no confidence)."""
    pairs = [[float(d["confidence"]), bool(ok)] for d, ok in details
             if isinstance(d.get("confidence"), (int, float)) and not isinstance(d.get("confidence"), bool)]
    return pairs or None


def rollup_calibration(descriptors: Sequence[dict[str, Any]]) -> float | None:
    """The calibration error over every run of ``descriptors`` that has a confidence (None when none has)."""
    pairs = [p for d in descriptors for p in d.get(PAIRS_KEY) or []]
    return calibration_error([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
