"""Reading a number out of a free-text answer (commas, units, currency, LaTeX)."""

from __future__ import annotations

import re

_NUM_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def extract_number(text: str | None) -> float | None:
    """The answer's number: after a ``####``/``answer:``/``\\boxed{}`` marker if any, else the last one.

    >>> extract_number("So she pays $1,250.50 in total.")
    1250.5
    """
    if text is None:
        return None
    s = str(text)
    for marker in (r"\\boxed\{([^}]*)\}", r"####\s*(.+)", r"(?i)answer\s*(?:is|:)\s*(.+)"):
        m = re.search(marker, s)
        if m and _NUM_RE.search(m.group(1)):
            s = m.group(1)
            break
    nums = _NUM_RE.findall(s)
    if not nums:
        return None
    raw = nums[-1] if s is text else nums[0]
    raw = raw.replace(",", "").rstrip(".")
    try:
        return float(raw)
    except ValueError:
        return None


def numbers_equal(a: float, b: float | int | str, rel: float = 1e-6) -> bool:
    """Equal within a relative tolerance; ``b`` may be a string with commas."""
    try:
        bf = float(str(b).replace(",", ""))
    except ValueError:
        return False
    return abs(a - bf) <= rel * max(1.0, abs(bf))
