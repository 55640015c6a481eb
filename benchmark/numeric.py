"""Reading a number out of a free-text answer (commas, units, currency, LaTeX)."""

from __future__ import annotations

import re

# A comma only counts as a thousands separator in groups of three ("1,234,567"),
# so "1,2" reads as two numbers; a minus glued to a digit ("16-3") is not a sign.
_NUM_RE = re.compile(r"(?<![\d.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\d.])-?\.\d+")
_MARKERS = tuple(re.compile(m) for m in (
    r"\\boxed\{([^}]*)\}",
    r"####\s*(.+)",
    r"(?i)final answer\s*(?:is|:|=)?\s*(.+)",
    r"(?i)answer\s*(?:is|:|=)\s*(.+)",
))
_BOXED = _MARKERS[0]
_NEGATED = re.compile(r"(?i)\s*:?\s*(?:not\b|n't\b)")
"""A marker that says what the answer is *not* ("the answer is not 46") marks nothing."""
_CLAUSE_END = re.compile(r";|\n|\.(?:\s|$)|\)")
"""Where a marker's clause ends: the number it marks is in the same clause ("final answer. (Earlier 46.)" marks no 46)."""
_SENTENCE_START = re.compile(r".*(?:[;\n]|\.(?:\s|$))", re.DOTALL)
# Unicode minus/dashes and thin/no-break spaces models use in numbers.
_NORMALISE = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2009": "", "\u202f": "", "\u00a0": " "})


def extract_number(text: str | None) -> float | None:
    """The answer's number: the one the last answer marker (``\\boxed{}``, ``####``, ``final answer``,
    ``answer is``/``answer:``) marks, else the last number of the text.

    A marker marks the first number after it in its clause ("The answer is 18 eggs, 3 each" -> 18), else the last
    one before it in its sentence ("So 53 is my final answer. (Earlier I wrote 46.)" -> 53); the marker that comes
    last in the text wins over earlier drafts, whichever its kind ("\\boxed{46} was a draft; Final answer: 53" ->
    53), and "the answer is not 46" marks nothing. Thousands commas, currency signs, units and a trailing period
    are ignored. What it cannot tell is a hedge without a marker ("53 or maybe 46" -> 46, the last number), the
    rule of lenient GSM8K graders; the project's agents answer in a field of their own, which is what is read.

    >>> extract_number("So she pays $1,250.50 in total.")
    1250.5
    >>> extract_number("The answer is 18.")
    18.0
    >>> [extract_number(t) for t in ("The answer is not 46; it is 53.", "53 (that is my final answer; a draft said 46)")]
    [53.0, 53.0]
    """
    if text is None:
        return None
    s = str(text).translate(_NORMALISE)
    marks = sorted((m for marker in _MARKERS for m in marker.finditer(s)), key=lambda m: m.start(), reverse=True)
    for m in marks:  # the last marked answer wins over earlier drafts
        if m.re is _BOXED:
            nums = _NUM_RE.findall(m.group(1))
            if nums:
                return _number(nums[0])
            continue
        span = m.group(1)
        if _NEGATED.match(span):
            continue
        nums = _NUM_RE.findall(_CLAUSE_END.split(span, 1)[0])
        if nums:
            return _number(nums[0])
        before = s[:m.start()]
        start = _SENTENCE_START.match(before)
        nums = _NUM_RE.findall(before[start.end():] if start else before)
        if nums:
            return _number(nums[-1])
    nums = _NUM_RE.findall(s)
    return _number(nums[-1]) if nums else None


def _number(raw: str) -> float | None:
    try:
        return float(raw.replace(",", ""))
    except ValueError:
        return None


def numbers_equal(a: float, b: float | int | str, rel: float = 1e-6) -> bool:
    """Equal within a relative tolerance; ``b`` may be a string with commas, ``$`` or a trailing period."""
    try:
        bf = float(str(b).replace(",", "").replace("$", "").strip().rstrip("."))
    except ValueError:
        return False
    return abs(a - bf) <= rel * max(1.0, abs(bf))
