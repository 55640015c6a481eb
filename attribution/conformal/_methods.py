"""The conformal methods by name: each is a threshold rule, ``(step scores, aggregator, u) -> h``.

Step ``i`` is in a method's set iff ``h[i] <= q_hat``, and a trajectory's calibration score is ``h[e]`` for its
decisive step ``e``; everything else (the quantile, ``auto``, the files) is shared. The built-in rules register
themselves in :mod:`._paper` and :mod:`._contiguous`; installed packages add theirs through the
``mas_econ.conformal`` entry-point group, other code as a plugin (``--plugin MODULE``). ``u`` is the
per-trajectory draw in (0, 1] that only ``crsvp`` and ``crsvp_released`` use.

>>> import numpy as np
>>> @CONFORMAL_METHODS.register("doc_flat")
... def flat(s, agg, u=1.0):
...     return np.zeros(len(s))
>>> "doc_flat" in method_names()
True
>>> CONFORMAL_METHODS.unregister("doc_flat")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from attribution.conformal._aggregators import Aggregator
from descriptor.registry import Registry

ThresholdRule = Callable[[Sequence[float], Aggregator, float], np.ndarray]
"""``(step scores in [0, 1], set-score aggregator, u) -> per-step inclusion thresholds h``."""

CONFORMAL_METHODS: Registry[ThresholdRule] = Registry("conformal method", "mas_econ.conformal")
"""Conformal method name -> threshold rule (``auto`` is not one: it picks among them)."""

BUILT_IN_ORDER = ("vcp", "crsvp", "crsvp_released", "lf", "rf", "twf", "trim", "grow", "band")
"""The built-in methods in the order they are listed and evaluated (the paper's, then the contiguous ones)."""


def base_methods() -> tuple[str, ...]:
    """Every registered method: the built-in ones in :data:`BUILT_IN_ORDER`, then the others sorted."""
    names = CONFORMAL_METHODS.names()
    return (*(m for m in BUILT_IN_ORDER if m in names), *(m for m in names if m not in BUILT_IN_ORDER))


def method_names() -> tuple[str, ...]:
    """What ``--method`` accepts: every registered method and ``auto``."""
    return (*base_methods(), "auto")
