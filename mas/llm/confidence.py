"""The one reader of a confidence (or likelihood) a model wrote: the runtime's answers and attribution's replies.

One rule for every caller; only the value for "none given" is the caller's:

- a number in [0, 1] is a probability: ``0.7``, ``"0.7"``, ``".7"`` -> 0.7;
- a number in (1, 100] is a percentage, with or without ``%``: ``"7"`` -> 0.07, ``70`` -> 0.7, ``"70%"`` -> 0.7;
  a ``%`` always divides by 100, once (``"0.5%"`` -> 0.005, ``"150%"`` -> 1.0);
- anything else numeric is clipped to [0, 1] (``-3`` -> 0.0, ``250`` -> 1.0);
- a word: ``very high`` 0.9, ``high`` 0.8, ``medium``/``moderate`` 0.5, ``low`` 0.2, ``very low`` 0.1;
- in other text, its first number under the rules above (``"confidence: 0.8"`` -> 0.8);
- missing (None), a boolean, NaN or infinity, or text with no number -> ``default``.

Why percentages and not clipping for ``"7"``: a model asked for [0, 1] that answers above 1 has
answered on another scale, most often percent ("85"); clipping would turn every such answer into
certainty.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, overload

WORDS = {"very high": 0.9, "high": 0.8, "medium": 0.5, "moderate": 0.5, "low": 0.2, "very low": 0.1}
"""Confidence words and the probability each stands for."""

_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)")


@overload
def parse_confidence(value: Any, default: float) -> float: ...
@overload
def parse_confidence(value: Any, default: None) -> float | None: ...
def parse_confidence(value: Any, default: float | None) -> float | None:
    """A confidence in [0, 1] from what a model wrote (see the module docstring); ``default`` when none.

    >>> [parse_confidence(v, 0.5) for v in ("0.7", "7", "70%", 70, "high", None, float("nan"), "n/a")]
    [0.7, 0.07, 0.7, 0.7, 0.8, 0.5, 0.5, 0.5]
    """
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, str):
        text = value.strip().lower()
        if text in WORDS:
            return WORDS[text]
        m = _NUMBER.search(text)
        if not m:
            return default
        x, percent = float(m.group()), "%" in text
    elif isinstance(value, numbers.Real):
        x, percent = float(value), False
    else:
        return default
    if not math.isfinite(x):
        return default
    if percent or 1.0 < x <= 100.0:
        x /= 100.0
    return min(1.0, max(0.0, x))
