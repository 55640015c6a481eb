"""Tolerant JSON extraction from model text (fenced blocks, chatter around it)."""

from __future__ import annotations

import json
import re
from typing import Any

from mas.llm.sanitize import clean_data

_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def _balanced_objects(text: str) -> list[str]:
    """Every top-level ``{...}`` span in ``text``, honouring strings and escapes."""
    spans, depth, start, in_str, esc = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def parse_json_object(text: str | None) -> dict[str, Any] | None:
    """The first JSON object found in ``text``, or None.

    Tries, in order: the whole text, fenced blocks, balanced ``{...}`` spans;
    trailing commas are forgiven. Strings are cleaned and absurd nesting cut (:func:`mas.llm.sanitize.clean_data`).

    >>> parse_json_object('Sure! ```json\\n{"answer": 4,}\\n``` hope it helps')
    {'answer': 4}
    """
    if not text:
        return None
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE_RE.finditer(text)]
    candidates += _balanced_objects(text)
    for cand in candidates:
        for variant in (cand, re.sub(r",\s*([}\]])", r"\1", cand)):
            try:
                obj = json.loads(variant)
            except (json.JSONDecodeError, ValueError, RecursionError):  # nested past the stack: no usable object
                continue
            if isinstance(obj, dict):
                return clean_data(obj)
    return None
