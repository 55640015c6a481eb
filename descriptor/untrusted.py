"""Parsing what a command reads from files: every file is untrusted.

Every JSON file and JSON line a command reads (run files, the summaries'
cache, score files, conformal calibrations, span exports, Who&When records,
attribution outputs) is parsed by :func:`parse_json`: pydantic-core's parser
(jiter), which refuses nesting deeper than :data:`MAX_DEPTH` with an error
instead of recursing. Python's ``json`` raises ``RecursionError`` near a
thousand levels (no reader caught it: ``summarize-experiment`` and ``report``
aborted on one run's ``result.json``), and a structure just under that depth
would still overflow any recursive walk after it (redaction, flattening span
attributes, sorting keys). The same parser validates trace lines and index
lines (``model_validate_json``), so one bound holds everywhere. It also takes
about half of ``json.loads``'s time on a run's ``result.json`` and
``metadata.json`` (22 against 48 µs, 99 against 209 µs).

It differs from ``json.loads`` in one more way: a lone surrogate escape
(``"\\ud800"``) is refused, as it is no text (the project's writer could not
write it back).

Numbers written as text (a step label, a run index in a file name) are ASCII
digits: ``"²"`` passes ``str.isdigit()`` but ``int()`` refuses it
(:func:`parse_index`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic_core import from_json

MAX_DEPTH = 200
"""Deepest nesting of objects and arrays read (pydantic-core's fixed limit; run files nest a few levels)."""


class BadJson(ValueError):
    """Text that is not JSON, or nests deeper than :data:`MAX_DEPTH`; the message says what and where."""


def parse_json(text: str | bytes) -> Any:
    """``text`` as Python values (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``).

    Raises :class:`BadJson` (a ``ValueError``), never ``RecursionError``.

    >>> parse_json('{"a": [1, 2.5, null]}')
    {'a': [1, 2.5, None]}
    >>> try:
    ...     parse_json("[" * 100_000)
    ... except BadJson as err:
    ...     print(err)
    nested deeper than 200 levels (recursion limit exceeded at line 1 column 202)
    """
    try:
        return from_json(text)
    except ValueError as err:
        message = str(err)
    if "recursion limit" in message:
        raise BadJson(f"nested deeper than {MAX_DEPTH} levels ({message})")
    raise BadJson(message)


_INDEX = re.compile(r"[0-9]{1,9}")


def parse_index(text: str) -> int | None:
    """``text`` as a non-negative integer when it is 1 to 9 ASCII digits, else None.

    >>> parse_index("12"), parse_index("²"), parse_index("1.0"), parse_index("9" * 5000)
    (12, None, None, None)
    """
    return int(text) if _INDEX.fullmatch(text) else None
