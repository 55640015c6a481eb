"""Keep secrets out of artifacts: traces, metadata and logs pass through here."""

from __future__ import annotations

import json
import os
import re
from typing import Any

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|sk-or-v1-[A-Za-z0-9]{16,}|Bearer\s+[A-Za-z0-9._\-]{16,})")
REDACTED = "[REDACTED]"


_cached: tuple[Any, list[str], list[str] | None] = (None, [], [])


def _secret_table() -> tuple[list[str], list[str] | None]:
    """Values of secret-named environment variables (8+ characters) and their JSON-escaped forms (None
    when one would not be escaped predictably), recomputed whenever the environment changes.

    Every trace event passes through here, and decoding all of ``os.environ``
    per event cost a quarter of a millisecond; the raw environment is
    compared with a copy instead (a C-level dict compare), so a key set
    mid-run is still redacted from the next event on.
    """
    global _cached
    raw = getattr(os.environ, "_data", None)  # CPython's undecoded mapping; None elsewhere: no caching
    if raw is not None and raw == _cached[0]:
        return _cached[1], _cached[2]
    key = dict(raw) if raw is not None else None
    values = [v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8]
    plain = all(not any(c in '"\\' or c < " " for c in v) for v in values)
    needles = [json.dumps(v, ensure_ascii=False)[1:-1] for v in values] if plain else None
    _cached = (key, values, needles)
    return values, needles


def may_hold_secret(text: str) -> bool:
    """Whether the JSON text ``text`` may hold a secret value or a key shape (False: :func:`redact` would
    change nothing in the data it was serialized from).

    A few substring searches over one string, against a walk over every string of the data: the tracer
    serializes each event anyway and redacts only when this says so.
    """
    _values, needles = _secret_table()
    if needles is None:  # a secret with quotes, backslashes or control characters: always redact
        return True
    return "sk-" in text or "Bearer" in text or any(n in text for n in needles)


def redact(value: Any, _secrets: list[str] | None = None) -> Any:
    """Replace secret environment values and key-shaped strings, recursively.

    >>> redact({"auth": "Bearer abcdefghijklmnopqrstu"})
    {'auth': '[REDACTED]'}
    """
    secrets = _secret_table()[0] if _secrets is None else _secrets
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, REDACTED)
        # Every key shape starts with "sk-" or "Bearer": a substring test spares the regex on almost every string.
        if "sk-" in value or "Bearer" in value:
            value = _KEY_SHAPES.sub(REDACTED, value)
        return value
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


def structlog_redactor(_logger: Any, _name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor applying :func:`redact` to every log record."""
    return redact(event_dict)
