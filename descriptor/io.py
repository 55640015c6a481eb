"""Atomic file writes: a reader never sees a half-written artifact."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic_core import to_json


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to a temp file beside ``path``, fsync, then rename over it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_text_atomic(path: str | Path, text: str) -> Path:
    """:func:`write_bytes_atomic` of ``text`` as UTF-8."""
    return write_bytes_atomic(path, text.encode())


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Atomically write ``data`` as indented UTF-8 JSON; NaN and infinities become null, unknown types their ``str``.

    pydantic-core's serializer writes what ``json.dumps(indent=2)`` wrote at a
    seventh of its cost: with ``indent`` the standard library falls back to
    its pure-Python encoder, and a run writes six of these files.
    """
    return write_bytes_atomic(path, to_json(data, indent=2, inf_nan_mode="null", fallback=str) + b"\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file; errors name the file."""
    from descriptor.errors import UserError

    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{p}: file not found") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{p}: not valid JSON ({err})") from None
