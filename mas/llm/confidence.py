"""The one reader of a confidence (or likelihood) a model wrote: the runtime's answers and attribution's replies.

Two scales, chosen by the caller; only the value for "none given" is the caller's too:

``clip`` (the harness README's rule, "Average confidence"; the runtime's default, ``mas.confidence_scale``):

- the value converted to a float as Python's ``float`` converts it (``0.7``, ``"0.7"``, ``" .7 "``, ``"1e-1"``),
  then clipped into [0, 1]: ``"1.5"`` -> 1.0, ``"-0.2"`` -> 0.0, ``85`` -> 1.0;
- missing (None) or unparsable (``"high"``, ``"9/10"``, ``"70%"``, ``"confidence: 0.8"``, NaN, a boolean, a
  list) -> ``default``.

``percent`` (attribution's replies, and the runtime's option ``mas.confidence_scale = "percent"``):

- a number in [0, 1] is a probability: ``0.7``, ``"0.7"``, ``".7"`` -> 0.7;
- a number in (1, 100] is a percentage, with or without ``%``: ``"7"`` -> 0.07, ``70`` -> 0.7, ``"70%"`` -> 0.7;
  a ``%`` always divides by 100, once (``"0.5%"`` -> 0.005, ``"150%"`` -> 1.0);
- anything else numeric is clipped to [0, 1] (``-3`` -> 0.0, ``250`` -> 1.0);
- a word: ``very high`` 0.9, ``high`` 0.8, ``medium``/``moderate`` 0.5, ``low`` 0.2, ``very low`` 0.1;
- in other text, its first number under the rules above (``"confidence: 0.8"`` -> 0.8);
- missing (None), a boolean, NaN or infinity, or text with no number -> ``default``.

Why two: an answer's ``confidence`` is a field of the metric contract (``average_confidence``), and the
harness README fixes its rule, so the runtime follows it by default. An attribution method reads likelihoods
out of free-text replies ("80%", "high"), where reading a percentage as one is what the model meant; clipping
would turn every such answer into certainty or the default.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, Literal, overload

Scale = Literal["clip", "percent"]
SCALES: tuple[str, ...] = ("clip", "percent")

WORDS = {"very high": 0.9, "high": 0.8, "medium": 0.5, "moderate": 0.5, "low": 0.2, "very low": 0.1}
"""Confidence words and the probability each stands for (``percent`` scale)."""

_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)")


@overload
def parse_confidence(value: Any, default: float, scale: Scale = ...) -> float: ...
@overload
def parse_confidence(value: Any, default: None, scale: Scale = ...) -> float | None: ...
def parse_confidence(value: Any, default: float | None, scale: Scale = "percent") -> float | None:
    """A confidence in [0, 1] from what a model wrote, on ``scale`` (see the module docstring); ``default`` when
    none.

    >>> [parse_confidence(v, 0.5, "clip") for v in ("0.7", "1.5", "-0.2", 85, "high", "9/10", None, "nan")]
    [0.7, 1.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5]
    >>> [parse_confidence(v, 0.5) for v in ("0.7", "7", "70%", 70, "high", None, float("nan"), "n/a")]
    [0.7, 0.07, 0.7, 0.7, 0.8, 0.5, 0.5, 0.5]
    """
    if scale == "clip":
        return _clipped(value, default)
    if scale != "percent":
        raise ValueError(f"confidence scale: expected one of {', '.join(SCALES)}, got {scale!r}")
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


def _clipped(value: Any, default: float | None) -> float | None:
    """The harness README's rule: ``float(value)`` clipped into [0, 1]; ``default`` when missing or unparsable.

    A boolean is not a confidence (``float(True)`` would be 1.0) and NaN has no place in [0, 1]: both count as
    unparsable. Infinity is a number and clips to an end.
    """
    if value is None or isinstance(value, bool) or not isinstance(value, (str, numbers.Real)):
        return default
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return default
    if math.isnan(x):
        return default
    return min(1.0, max(0.0, x))
