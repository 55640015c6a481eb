"""The one way files are written: atomically, with secrets redacted.

Every artifact the project writes (run files, manifests, summaries, score
files, reports) goes through :func:`write_bytes_atomic`: a temp file beside
the target, then ``os.replace``, so a reader (or a crash) sees the old file
or the new one, never half of one. Text and JSON pass through
:func:`descriptor.redact.redact` on the way, so a key that reached a model's
output, an error message or a config never lands on disk.

``durable=True`` (run artifacts: the files a resumed sweep trusts) also
fsyncs before the rename; derived files (summaries, reports) are rebuilt
from the run files by ``summarize-experiment`` and skip it: fsync was 4 of
8 s when summarising 640 runs. A file that already holds the bytes is not
rewritten, so reruns leave mtimes alone.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from descriptor.errors import UserError
from descriptor.redact import may_hold_secret, redact
from descriptor.untrusted import BadJson, parse_json


def _unchanged(path: Path, data: bytes) -> bool:
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


_FCHMOD = hasattr(os, "fchmod")
"""Whether the platform sets a mode through a descriptor (Windows has no ``os.fchmod``)."""


def write_bytes_atomic(path: str | Path, data: bytes, *, durable: bool = True, staged: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (mode 0644); ``durable`` fsyncs before the rename.

    Bytes are written as given (pictures); text and JSON go through
    :func:`write_text_atomic` and :func:`write_json_atomic`, which redact.

    ``staged``: a run file written before its run's commit record (``result.json``). No reader trusts
    it before that record exists, and an unfinished run's files are removed before it is redone, so it is
    written in place (an existing one truncated first): a temp file and a rename were half of the ~0.25 ms
    each of a run's files cost.
    """
    p = Path(path)
    if staged:
        with open(p, "wb") as fh:
            fh.write(data)
        return p
    if _unchanged(p, data):
        return p
    # A temp name of this process and thread (no other writer uses it) instead of mkstemp's random one, and calls
    # on the descriptor: 80 against 205 µs a file on tmpfs, a summary writing four per task.
    tmp = f"{p.parent}{os.sep}.{p.name}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        fd = _create(tmp, p)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if _FCHMOD:  # whatever the umask: artifacts are meant to be shared
                os.fchmod(fd, 0o644)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if not _FCHMOD:
            os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.errno is not None and err.filename in (None, tmp) and not err.filename2:
            err.filename = str(p)  # a write to a full disk names no file: name the one being written
        raise
    return p


def _create(tmp: str, target: Path) -> int:
    """A new file ``tmp`` opened for writing (never through a symlink); the target's directory is made if
    missing, and a stale ``tmp`` (a killed process of the same id) replaced."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(tmp, flags, 0o644)
    except FileNotFoundError:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        os.unlink(tmp)
    return os.open(tmp, flags, 0o644)


def write_text_atomic(path: str | Path, text: str | bytes, *, durable: bool = True, staged: bool = False) -> Path:
    """:func:`write_bytes_atomic` of ``text`` as UTF-8, secrets redacted."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return write_bytes_atomic(path, redact(text).encode("utf-8"), durable=durable, staged=staged)


def _sorted(data: Any) -> Any:
    # Plain dicts, lists and leaves first: an isinstance against the Mapping ABC for every value was most of
    # the cost of sorting a task's analysis.json.
    kind = type(data)
    if kind is str or kind is int or kind is float or kind is bool or data is None:
        return data
    if kind is dict or isinstance(data, Mapping):
        return {k: _sorted(data[k]) for k in sorted(data)}
    if kind is list or isinstance(data, list | tuple):
        return [_sorted(v) for v in data]
    return data


def json_bytes(data: Any, *, sort_keys: bool = False, indent: int | None = 2) -> bytes:
    """UTF-8 JSON (indented unless ``indent=None``) with a final newline; NaN and infinities become null,
    unknown types their ``str``.

    pydantic-core's serializer writes what ``json.dumps(indent=2)`` writes at a
    seventh of its cost (with ``indent`` the standard library falls back to its
    pure-Python encoder). Secrets are redacted: the serialized text is searched
    once, and only data that may hold one is walked.
    """
    if sort_keys:
        data = _sorted(data)
    out = to_json(data, indent=indent, inf_nan_mode="null", fallback=str)
    if may_hold_secret(out.decode("utf-8", errors="replace")):
        out = to_json(redact(to_jsonable(data)), indent=indent, inf_nan_mode="null", fallback=str)
    return out + b"\n"


def to_jsonable(data: Any) -> Any:
    """``data`` as plain JSON types (dicts, lists, str, numbers, bool, None)."""
    return json.loads(to_json(data, inf_nan_mode="null", fallback=str))


def write_json_atomic(path: str | Path, data: Any, *, durable: bool = True, sort_keys: bool = False,
                      indent: int | None = 2, staged: bool = False) -> Path:
    """Atomically write ``data`` as :func:`json_bytes` (``sort_keys`` for byte-stable derived files; ``indent=None``
    for machine-read files where the whitespace would be a third of the bytes; ``staged``: see
    :func:`write_bytes_atomic`)."""
    return write_bytes_atomic(path, json_bytes(data, sort_keys=sort_keys, indent=indent), durable=durable,
                              staged=staged)


def write_derived_json(path: str | Path, data: Any, *, indent: int | None = 2) -> Path:
    """A derived file (summary, descriptor, report data): key-sorted so reruns are byte-identical, no fsync;
    ``indent=None`` for the per-task files, which there is one of per task and which tools read."""
    return write_json_atomic(path, data, durable=False, sort_keys=True, indent=indent)


CSV_SIGNIFICANT = 6
"""Significant digits of a float in a CSV cell (JSON files keep every digit)."""


def csv_float(v: float) -> str:
    """``v`` rounded to :data:`CSV_SIGNIFICANT` significant digits, fixed-point, trailing zeros dropped.

    Fixed-point so a spreadsheet never shows a USD cost as ``1.2e-05``; the
    integer part is never rounded away.

    >>> [csv_float(v) for v in (5 / 6, 5936.25, 1.2345678e-05, 1234567.891, 2.0, 0.0, -0.05)]
    ['0.833333', '5936.25', '0.0000123457', '1234568', '2', '0', '-0.05']
    """
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else repr(v)
    decimals = max(0, CSV_SIGNIFICANT - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def csv_cell(value: Any) -> str:
    """CSV text of one value: ``None`` is an empty cell, booleans ``true``/``false``, floats :func:`csv_float`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return csv_float(value)
    return str(value)


def write_csv_atomic(path: str | Path, rows: Iterable[Mapping[str, Any]], columns: Sequence[str], *,
                     durable: bool = False) -> Path:
    """Write ``rows`` under the header ``columns``; missing keys and ``None`` are blanks."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(row.get(c)) for c in columns])
    return write_text_atomic(path, buf.getvalue(), durable=durable)


def read_json(path: str | Path) -> Any:
    """Read a JSON file; errors name the file."""
    p = Path(path)
    try:
        return parse_json(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{p}: file not found") from None
    except UnicodeDecodeError as err:
        raise UserError(f"{p}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except BadJson as err:
        raise UserError(f"{p}: not valid JSON ({err})") from None
    except OSError as err:
        raise UserError(f"{p}: cannot be read ({err.strerror})") from None
