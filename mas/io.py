"""Atomic file writes: a reader never sees a half-written artifact."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temp file beside ``path``, fsync, then rename over it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Atomically write ``data`` as indented JSON (NaN is written as null)."""
    return write_text_atomic(path, json.dumps(_nan_to_none(data), indent=2, ensure_ascii=False, default=str) + "\n")


def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_nan_to_none(v) for v in x]
    return x


def read_json(path: str | Path) -> Any:
    """Read a JSON file; errors name the file."""
    from mas.errors import UserError

    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{p}: file not found") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{p}: not valid JSON ({err})") from None
