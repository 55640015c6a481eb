"""Keep secrets out of artifacts: traces, metadata and logs pass through here."""

from __future__ import annotations

import os
import re
from typing import Any

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|sk-or-v1-[A-Za-z0-9]{16,}|Bearer\s+[A-Za-z0-9._\-]{16,})")
REDACTED = "[REDACTED]"


def _secret_values() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8]


def redact(value: Any, _secrets: list[str] | None = None) -> Any:
    """Replace secret environment values and key-shaped strings, recursively.

    >>> redact({"auth": "Bearer abcdefghijklmnopqrstu"})
    {'auth': '[REDACTED]'}
    """
    secrets = _secret_values() if _secrets is None else _secrets
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, REDACTED)
        return _KEY_SHAPES.sub(REDACTED, value)
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


def structlog_redactor(_logger: Any, _name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor applying :func:`redact` to every log record."""
    return redact(event_dict)
