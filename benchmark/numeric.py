"""Reading a number out of a free-text answer (commas, units, currency, LaTeX)."""

from __future__ import annotations

import re

# A comma only counts as a thousands separator in groups of three ("1,234,567"),
# so "1,2" reads as two numbers; a minus glued to a digit ("16-3") is not a sign.
_NUM_RE = re.compile(r"(?<![\d.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\d.])-?\.\d+")
_MARKERS = (
    r"\\boxed\{([^}]*)\}",
    r"####\s*(.+)",
    r"(?i)final answer\s*(?:is|:|=)?\s*(.+)",
    r"(?i)answer\s*(?:is|:|=)\s*(.+)",
)
# Unicode minus/dashes and thin/no-break spaces models use in numbers.
_NORMALISE = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2009": "", "\u202f": "", "\u00a0": " "})


def extract_number(text: str | None) -> float | None:
    """The answer's number: after a ``\\boxed{}``/``####``/``answer:`` marker if any, else the last one.

    After a marker the first number counts ("The answer is 18 eggs, 3 each" -> 18);
    without one the last number does.  Thousands commas, currency signs, units
    and a trailing period are ignored.

    >>> extract_number("So she pays $1,250.50 in total.")
    1250.5
    >>> extract_number("The answer is 18.")
    18.0
    """
    if text is None:
        return None
    s = str(text).translate(_NORMALISE)
    after_marker = False
    for marker in _MARKERS:
        found = [m.group(1) for m in re.finditer(marker, s) if _NUM_RE.search(m.group(1))]
        if found:
            s, after_marker = found[-1], True  # the last marked answer wins over earlier drafts
            break
    nums = _NUM_RE.findall(s)
    if not nums:
        return None
    raw = (nums[0] if after_marker else nums[-1]).replace(",", "")
    try:
        return float(raw)
    except ValueError:
        return None


def numbers_equal(a: float, b: float | int | str, rel: float = 1e-6) -> bool:
    """Equal within a relative tolerance; ``b`` may be a string with commas, ``$`` or a trailing period."""
    try:
        bf = float(str(b).replace(",", "").replace("$", "").strip().rstrip("."))
    except ValueError:
        return False
    return abs(a - bf) <= rel * max(1.0, abs(bf))
