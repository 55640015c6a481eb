"""BrowseComp's test set as OpenAI publishes it: a CSV whose text columns are encrypted with each row's canary.

Columns (``browse_comp_test_set.csv``): ``problem`` and ``answer`` (encrypted), ``problem_topic``
(clear text) and ``canary`` (clear text, the row's password). A column is decrypted by XOR with a
key stream made from SHA-256 of the canary: the 32-byte digest repeated to the ciphertext's length,
then the result read as UTF-8 (openai/simple-evals, ``browsecomp_eval.py``: ``derive_key``/``decrypt``).

The file is read from ``benchmarks.browsecomp.data_path`` and never copied: rows stay encrypted in
memory (:class:`Row`) and are decrypted where they are needed, never to disk.

>>> token = encrypt("Who wrote it?", "canary-1")
>>> decrypt(token, "canary-1")
'Who wrote it?'
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from descriptor.errors import UserError

COLUMNS = ("problem", "answer", "problem_topic", "canary")


def key_stream(password: str, length: int) -> bytes:
    """``length`` bytes: SHA-256 of ``password`` (UTF-8) repeated, the last copy cut short."""
    digest = hashlib.sha256(password.encode()).digest()
    whole, rest = divmod(length, len(digest))
    return digest * whole + digest[:rest]


def _xor(data: bytes, password: str) -> bytes:
    return bytes(a ^ b for a, b in zip(data, key_stream(password, len(data)), strict=True))


def decrypt(token: str, password: str) -> str:
    """The clear text of a base64 column value encrypted with ``password`` (ValueError when it is not one)."""
    return _xor(base64.b64decode(token, validate=True), password).decode("utf-8")


def encrypt(text: str, password: str) -> str:
    """The inverse of :func:`decrypt` (XOR is its own inverse): how the test fixtures are made."""
    return base64.b64encode(_xor(text.encode("utf-8"), password)).decode("ascii")


@dataclass(kw_only=True, frozen=True, slots=True)
class Row:
    """One problem as the file holds it: text columns still encrypted."""

    index: int
    """0-based data row (the file's line number minus 2 when no field spans lines)."""
    problem: str
    answer: str
    topic: str
    canary: str

    def decrypted_problem(self) -> str:
        return decrypt(self.problem, self.canary)

    def decrypted_answer(self) -> str:
        return decrypt(self.answer, self.canary)


@lru_cache(maxsize=4)
def read_rows(path: str) -> tuple[Row, ...]:
    """Every row of the CSV at ``path``, checked to decrypt; ``UserError`` naming the file and row otherwise."""
    p = Path(path).expanduser()
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(f"{p}: missing column(s) {', '.join(missing)}; a BrowseComp test set has "
                                f"{', '.join(COLUMNS)} (got {', '.join(reader.fieldnames or []) or 'no header'})")
            rows = [Row(index=i, problem=r["problem"] or "", answer=r["answer"] or "",
                        topic=r["problem_topic"] or "", canary=r["canary"] or "") for i, r in enumerate(reader)]
    except FileNotFoundError:
        raise UserError(f"benchmarks.browsecomp.data_path: {p}: file not found (the encrypted "
                        "browse_comp_test_set.csv from openai/simple-evals)") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise UserError(f"benchmarks.browsecomp.data_path: {p}: cannot read it as CSV ({err})") from None
    for row in rows:
        try:
            row.decrypted_problem()
            row.decrypted_answer()
        except (ValueError, binascii.Error):
            raise UserError(f"{p}: row {row.index + 1}: problem/answer do not decrypt with the row's canary "
                            "(expected base64 text encrypted as upstream does)") from None
    if not rows:
        raise UserError(f"{p}: no rows")
    return tuple(rows)
