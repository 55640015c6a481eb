"""The response cache: model replies kept in SQLite, keyed by everything that shapes the reply.

A second identical sweep, a resumed one, or a rollback that replays the same prefix need not pay again. The key
is a SHA-256 over the cache version, provider, model, endpoint (without credentials), the full request (messages,
tools, temperature, max_tokens, seed, response format) and the call's place in the run (contract, actor).

Two rules keep the cache from bending measurements:

- the run's seed is part of the key (each run of a task has its own seed, :func:`mas.sweep.runner.run_seed`), so
  repeated runs of one task never share an entry and their run-to-run variance survives; ``cache.share_runs``
  drops it, for a user who wants every run of a task to reuse the first run's replies;
- a call with temperature > 0 and no seed sent to the endpoint is nondeterministic: it is cached only with
  ``cache.nondeterministic = true``.

A hit is traced like a call (the same event, ``cache_hit: true``, the original token counts, ``cost_usd`` 0 and
the original price as ``cost_usd_saved``, ``latency_ms`` the lookup's), so every descriptor stays recomputable.
SQLite in WAL mode with a busy timeout lets concurrent sweeps and Dask workers on one host share one file.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from langchain_core.messages import AIMessage, BaseMessage, message_to_dict, messages_from_dict

from descriptor.redact import redact

if TYPE_CHECKING:
    from mas.study_settings import CacheSettings

CACHE_VERSION = 1
"""Bumped when the key or the stored reply changes shape; older entries are then never hit."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    created REAL NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    reply TEXT NOT NULL,
    token_in INTEGER NOT NULL,
    token_out INTEGER NOT NULL,
    usage_source TEXT NOT NULL,
    cost_usd REAL NOT NULL,
    latency_ms REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0
)
"""


@dataclass(kw_only=True, slots=True, frozen=True)
class CachedReply:
    """A stored reply and what it cost when it was made."""

    message: AIMessage
    token_in: int
    """Prompt tokens of the original call (tokens)."""
    token_out: int
    """Completion tokens of the original call (tokens)."""
    usage_source: str
    cost_usd: float
    """Price of the original call (USD): what a hit saves."""
    latency_ms: float
    """Latency of the original call (ms)."""


class ResponseCache:
    """One SQLite file of replies; safe to share between threads, processes and sweeps on one host."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        # A lost last write costs one re-sent request, never a wrong reply: no fsync per entry.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)

    def get(self, key: str, *, max_age_days: float | None = None) -> CachedReply | None:
        """The reply stored under ``key`` (counted as a hit), or None; entries older than ``max_age_days`` miss."""
        with self._lock:
            row = self._db.execute(
                "SELECT reply, token_in, token_out, usage_source, cost_usd, latency_ms, created FROM responses "
                "WHERE key = ? AND version = ?", (key, CACHE_VERSION)).fetchone()
            if row is None or (max_age_days is not None and time.time() - row[6] > max_age_days * 86400):
                return None
            self._db.execute("UPDATE responses SET hits = hits + 1 WHERE key = ?", (key,))
        message = messages_from_dict([json.loads(row[0])])[0]
        if not isinstance(message, AIMessage):  # written by us as an AI message; anything else is not a reply
            return None
        return CachedReply(message=message, token_in=row[1], token_out=row[2], usage_source=row[3],
                           cost_usd=row[4], latency_ms=row[5])

    def put(self, key: str, *, provider: str, model: str, reply: CachedReply) -> None:
        """Store ``reply`` under ``key`` (replacing an expired or older entry), secrets redacted: a model that echoed
        a key would otherwise keep it on disk and replay it into the artifacts of later runs, after the key was
        rotated and no longer known as a secret."""
        data = json.dumps(redact(message_to_dict(reply.message)), ensure_ascii=False, default=str)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, version, created, provider, model, reply, token_in, token_out,"
                " usage_source, cost_usd, latency_ms, hits) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (key, CACHE_VERSION, time.time(), provider, model, data, reply.token_in, reply.token_out,
                 reply.usage_source, reply.cost_usd, reply.latency_ms))

    def stats(self) -> list[dict[str, Any]]:
        """Per (provider, model): entries, hits, and the price of the stored replies (USD) and of the hits."""
        with self._lock:
            rows = self._db.execute(
                "SELECT provider, model, COUNT(*), SUM(hits), SUM(cost_usd), SUM(cost_usd * hits), "
                "SUM(token_in + token_out) FROM responses GROUP BY provider, model ORDER BY provider, model"
            ).fetchall()
        return [{"provider": p, "model": m, "entries": n, "hits": h or 0, "cost_usd_stored": c or 0.0,
                 "cost_usd_saved": s or 0.0, "tokens_stored": t or 0} for p, m, n, h, c, s, t in rows]

    def clear(self, *, older_than_days: float | None = None) -> int:
        """Remove every entry (or those older than ``older_than_days``); returns how many went."""
        with self._lock:
            if older_than_days is None:
                cur = self._db.execute("DELETE FROM responses")
            else:
                cur = self._db.execute("DELETE FROM responses WHERE created < ?",
                                       (time.time() - older_than_days * 86400,))
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return cur.rowcount

    def export(self) -> Iterator[dict[str, Any]]:
        """Every entry as a JSON-ready dict (key, provider, model, reply message, usage, cost, hits)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, version, created, provider, model, reply, token_in, token_out, usage_source, cost_usd,"
                " latency_ms, hits FROM responses ORDER BY created").fetchall()
        names = ("key", "version", "created", "provider", "model", "reply", "token_in", "token_out",
                 "usage_source", "cost_usd", "latency_ms", "hits")
        for row in rows:
            entry = dict(zip(names, row, strict=True))
            entry["reply"] = json.loads(entry["reply"])
            yield entry

    def close(self) -> None:
        with self._lock:
            self._db.close()


def endpoint_label(base_url: str | None) -> str:
    """``base_url`` without userinfo, query or fragment: the key names the endpoint, never its credentials.

    >>> endpoint_label("http://user:pw@host:8000/v1?api-key=x")
    'http://host:8000/v1'
    """
    if not base_url:
        return ""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_SCHEMAS: dict[int, tuple[Any, Any]] = {}
"""id(tool) -> (tool, its OpenAI schema): converting a tool costs more than the rest of a key, and the same tool
objects come back call after call. The tool is held so its id is not reused; the table is bounded."""


def _tool_schema(tool: Any) -> Any:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    known = _SCHEMAS.get(id(tool))
    if known is not None and known[0] is tool:
        return known[1]
    try:
        schema = convert_to_openai_tool(tool)
    except Exception:  # any tool LangChain cannot describe is keyed by its name: still a distinct request
        schema = getattr(tool, "name", str(tool))
    if len(_SCHEMAS) > 4096:
        _SCHEMAS.clear()
    _SCHEMAS[id(tool)] = (tool, schema)
    return schema


def _wire_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """What the endpoint is sent of each message: role, content, tool calls and the tool a result answers.

    LangChain's message ids and response metadata never reach the endpoint and differ between identical runs, so
    they stay out of the key; tool-call ids are numbered by first appearance for the same reason (a call written
    as text gets a random id).
    """
    ids: dict[str, str] = {}

    def norm(call_id: Any) -> str:
        return ids.setdefault(str(call_id), f"call_{len(ids)}")

    wire = []
    for m in messages:
        entry: dict[str, Any] = {"role": m.type, "content": m.content}
        if isinstance(m, AIMessage) and m.tool_calls:
            entry["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": norm(c.get("id"))} for c in m.tool_calls]
        if (tool_call_id := getattr(m, "tool_call_id", None)) is not None:
            entry["tool_call_id"] = norm(tool_call_id)
        wire.append(entry)
    return wire


def request_key(*, provider: str, model: str, endpoint: str, messages: Sequence[BaseMessage], tools: Sequence[Any],
                temperature: float | None, max_tokens: int | None, seed: int | None,
                response_format: dict[str, Any] | None, place: dict[str, Any]) -> str:
    """SHA-256 (hex) of everything that shapes a reply; see the module docstring for what is in it."""
    request = {
        "version": CACHE_VERSION, "provider": provider, "model": model, "endpoint": endpoint,
        "messages": _wire_messages(messages), "tools": [_tool_schema(t) for t in tools],
        "temperature": temperature, "max_tokens": max_tokens, "seed": seed, "response_format": response_format,
        "place": place,
    }
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(kw_only=True, slots=True, frozen=True)
class CacheUse:
    """The cache a run reads and writes, and under which rules."""

    cache: ResponseCache
    reads: bool
    writes: bool
    settings: CacheSettings
    run_seed: int | None
    """The run's seed, part of every key unless ``share_runs``."""

    def cacheable(self, temperature: float | None, sent_seed: int | None) -> bool:
        """Whether a call may be cached: deterministic, or nondeterministic caching was asked for."""
        deterministic = not temperature or sent_seed is not None
        return deterministic or self.settings.nondeterministic

    def scope(self) -> int | None:
        return None if self.settings.share_runs else self.run_seed


_OPEN: dict[Path, ResponseCache] = {}
_OPEN_LOCK = threading.Lock()
_current: contextvars.ContextVar[CacheUse | None] = contextvars.ContextVar("mas_response_cache", default=None)


def default_path() -> Path:
    """``$MAS_CACHE_DIR/responses.sqlite`` or the user cache dir's ``mas-econ/responses.sqlite``."""
    from mas.serving.catalogue import cache_root

    return cache_root() / "responses.sqlite"


def open_cache(path: Path | str | None) -> ResponseCache:
    """The process's one open cache for ``path`` (default: :func:`default_path`)."""
    resolved = Path(path).expanduser().resolve() if path else default_path()
    with _OPEN_LOCK:
        if resolved not in _OPEN:
            _OPEN[resolved] = ResponseCache(resolved)
        return _OPEN[resolved]


@contextlib.contextmanager
def use_cache(settings: CacheSettings | None, *, run_seed: int | None) -> Iterator[CacheUse | None]:
    """Make the cache ``settings`` name current for the enclosed run (nothing when its mode is ``off``)."""
    if settings is None or settings.mode == "off":
        yield None
        return
    use = CacheUse(cache=open_cache(settings.path), reads="read" in settings.mode, writes="write" in settings.mode,
                   settings=settings, run_seed=run_seed)
    token = _current.set(use)
    try:
        yield use
    finally:
        _current.reset(token)


def current_cache() -> CacheUse | None:
    """The cache of the run being executed, or None."""
    return _current.get()
