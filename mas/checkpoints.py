"""A run's LangGraph checkpoint database, opened so that no secret is ever written into it.

Checkpoints hold graph state: model replies, tool outputs, error messages.
A key a model echoed, or one inside an endpoint's error body, would land in
``run_<r>.checkpoints.sqlite`` (and, once written, in SQLite's free pages and
WAL even after a delete). So the serializer masks secrets *before* any byte
reaches SQLite: :class:`RedactingSerializer` wraps LangGraph's own
serializer and overwrites every secret (:func:`descriptor.redact.mask_secret_bytes`,
same length, so msgpack stays valid) in what it produces.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from descriptor.redact import mask_secret_bytes


class RedactingSerializer:
    """LangGraph's ``SerializerProtocol``: ``inner``'s bytes with every secret masked; loading is ``inner``'s."""

    def __init__(self, inner: Any | None = None) -> None:
        self.inner = inner or JsonPlusSerializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.inner.dumps_typed(obj)
        return type_, mask_secret_bytes(data)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)


@contextlib.asynccontextmanager
async def open_checkpointer(path: str | Path) -> AsyncIterator[AsyncSqliteSaver]:
    """An ``AsyncSqliteSaver`` on ``path`` whose checkpoints and pending writes are redacted."""
    import aiosqlite

    async with aiosqlite.connect(str(path)) as conn:
        yield AsyncSqliteSaver(conn, serde=RedactingSerializer())
