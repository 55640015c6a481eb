"""Rows of benchmark data files in JSON Lines (plain or gzipped), with the file and line of a bad one."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from descriptor.errors import UserError
from descriptor.untrusted import BadJson, parse_json


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL (or ``.jsonl.gz``) file; a bad line is a ``UserError`` naming file and line."""
    return [row for _, row in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of every row of a JSONL (or ``.jsonl.gz``) file; blank lines are skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = parse_json(line)
                except BadJson as exc:
                    raise UserError(f"{path}:{lineno}: not valid JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise UserError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
                rows.append((lineno, row))
    except FileNotFoundError:
        raise UserError(f"data file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read data file {path}: {exc}") from None
    return rows
