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
the route's price of those tokens as ``cost_usd_saved``, ``latency_ms`` the lookup's), so every descriptor stays
recomputable. SQLite in WAL mode with a busy timeout lets concurrent sweeps and Dask workers on one host share one
file.

What is read back is untrusted, as a reply from the endpoint is: a stored entry passes the checks a fresh reply
passes (:mod:`mas.llm.sanitize`: a reply already clean, usage counts to believe; a reply that decodes to an AI
message; a known usage source, a price and a latency that are numbers >= 0). We store only entries that pass, so
one that fails was damaged or written by someone else: it is a miss (the call is made again and its reply
replaces the entry) and is counted in the ``rejections`` table, which ``cache stats`` shows. A file at the
cache's path that is not a response cache (another file, another database) is refused when it is opened
(:class:`CacheFileError`), which a sweep does before its first run.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from langchain_core.messages import AIMessage, BaseMessage, message_to_dict, messages_from_dict

from descriptor.errors import UserError
from descriptor.redact import redact
from mas.llm.sanitize import clean_message, sane_usage

if TYPE_CHECKING:
    from mas.study_settings import CacheSettings

CACHE_VERSION = 1
"""Bumped when the key or the stored reply changes shape; older entries are then never hit."""

class CacheFileError(UserError):
    """The file at the cache's path is not a response cache (or cannot be opened as one)."""


_REJECTIONS = """
CREATE TABLE IF NOT EXISTS rejections (
    key TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    reason TEXT NOT NULL,
    created REAL NOT NULL
)
"""
_TABLES = {"responses", "rejections"}
_COLUMNS = {"key", "version", "created", "provider", "model", "reply", "token_in", "token_out", "usage_source",
            "cost_usd", "latency_ms", "hits"}
USAGE_SOURCES = frozenset({"provider", "tokenizer", "estimate"})
"""Where a call's token counts came from (:attr:`mas.llm.call.LLMResult.usage_source`)."""

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
    """Price of the original call (USD), as stored (``cache stats``; a hit is priced at the route's price now)."""
    latency_ms: float
    """Latency of the original call (ms)."""


class ResponseCache:
    """One SQLite file of replies; safe to share between threads, processes and sweeps on one host."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        _check_file(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables - _TABLES:
                raise CacheFileError(f"{self.path}: an SQLite database of something else (tables: "
                                     f"{', '.join(sorted(tables - _TABLES))}), not a response cache")
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(responses)")}
            if "responses" in tables and not _COLUMNS <= columns:
                raise CacheFileError(f"{self.path}: its responses table lacks {', '.join(sorted(_COLUMNS - columns))};"
                                     " not a response cache")
            self._db.execute("PRAGMA journal_mode=WAL")
            # A lost last write costs one re-sent request, never a wrong reply: no fsync per entry.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.execute(_REJECTIONS)
        except sqlite3.DatabaseError as err:
            raise CacheFileError(f"{self.path}: not a response cache ({err})") from None

    def get(self, key: str, *, max_age_days: float | None = None) -> CachedReply | None:
        """The reply stored under ``key`` (counted as a hit), or None; entries older than ``max_age_days`` miss,
        and so does an entry that fails the checks of a fresh reply (counted as a rejection)."""
        with self._lock:
            row = self._db.execute(
                "SELECT reply, token_in, token_out, usage_source, cost_usd, latency_ms, created, provider, model "
                "FROM responses WHERE key = ? AND version = ?", (key, CACHE_VERSION)).fetchone()
            if row is None or (max_age_days is not None and _older(row[6], max_age_days)):
                return None
            try:
                reply = _read_entry(row)
            except _Damaged as damaged:
                self._db.execute("INSERT INTO rejections (key, provider, model, reason, created) "
                                 "VALUES (?, ?, ?, ?, ?)", (key, str(row[7]), str(row[8]), str(damaged)[:500],
                                                            time.time()))
                return None
            self._db.execute("UPDATE responses SET hits = hits + 1 WHERE key = ?", (key,))
        return reply

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
        """Per (provider, model): entries, hits, the price of the stored replies (USD) and of the hits, and the
        entries read back and rejected as damaged (each time, so one entry read twice counts twice)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT provider, model, COUNT(*), SUM(hits), TOTAL(cost_usd), TOTAL(cost_usd * hits), "
                "TOTAL(token_in + token_out) FROM responses GROUP BY provider, model ORDER BY provider, model"
            ).fetchall()
            rejected = dict(((p, m), n) for p, m, n in self._db.execute(
                "SELECT provider, model, COUNT(*) FROM rejections GROUP BY provider, model"))
        out = [{"provider": p, "model": m, "entries": n, "hits": h or 0, "cost_usd_stored": c or 0.0,
                "cost_usd_saved": s or 0.0, "tokens_stored": t or 0, "rejected": rejected.pop((p, m), 0)}
               for p, m, n, h, c, s, t in rows]
        out += [{"provider": p, "model": m, "entries": 0, "hits": 0, "cost_usd_stored": 0.0, "cost_usd_saved": 0.0,
                 "tokens_stored": 0, "rejected": n} for (p, m), n in sorted(rejected.items())]
        return out

    def clear(self, *, older_than_days: float | None = None) -> int:
        """Remove every entry (or those older than ``older_than_days``); returns how many went."""
        with self._lock:
            if older_than_days is None:
                cur = self._db.execute("DELETE FROM responses")
                self._db.execute("DELETE FROM rejections")
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
            try:
                entry["reply"] = json.loads(entry["reply"])
            except (TypeError, ValueError, RecursionError):  # a damaged entry is exported as the text it holds
                entry["reply_unreadable"] = True
            yield entry

    def close(self) -> None:
        with self._lock:
            self._db.close()


SQLITE_HEADER = b"SQLite format 3\x00"


def _check_file(path: Path) -> None:
    """:class:`CacheFileError` unless ``path`` is absent, empty, or an SQLite file (its tables are checked once
    it is open): SQLite itself would take a file of another kind for an empty database only when it is empty."""
    if path.is_dir():
        raise CacheFileError(f"{path}: is a directory; expected the response cache's SQLite file")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as err:
        raise CacheFileError(f"{path}: cannot be read as the response cache ({err.strerror})") from None
    if head and head != SQLITE_HEADER:
        raise CacheFileError(f"{path}: not a response cache (not an SQLite file); point cache.path elsewhere or "
                             "remove it")


class _Damaged(ValueError):
    """A stored entry that fails the checks a fresh reply passes (the message says which)."""


def _older(created: Any, days: float) -> bool:
    return not isinstance(created, int | float) or time.time() - created > days * 86400


def _read_entry(row: tuple[Any, ...]) -> CachedReply:
    """The reply of a stored row (reply, token_in, token_out, usage_source, cost_usd, latency_ms, ...) when it is
    what this module writes; :class:`_Damaged` naming what is wrong otherwise."""
    reply, token_in, token_out, source, cost, latency = row[:6]
    try:
        data = json.loads(reply)
        message = messages_from_dict([data])[0]
    except Exception as err:  # noqa: BLE001  (not JSON, too deep, no message: whatever it is, it is no reply)
        raise _Damaged(f"reply: not a stored message ({type(err).__name__}: {str(err)[:200]})") from None
    if not isinstance(message, AIMessage):
        raise _Damaged(f"reply: a {type(message).__name__}, not an AI message")
    stored = message_to_dict(message)
    if message_to_dict(clean_message(message)) != stored:
        raise _Damaged("reply: holds what a reply is cleaned of (lone surrogates, NUL, deep nesting, unsafe tool "
                       "names); every stored reply was cleaned")
    if not all(type(n) is int for n in (token_in, token_out)) or sane_usage(token_in, token_out)[1]:
        raise _Damaged(f"token_in={str(token_in)[:40]!r}, token_out={str(token_out)[:40]!r}: not counts to believe")
    if source not in USAGE_SOURCES:
        raise _Damaged(f"usage_source={str(source)[:40]!r}: expected one of {', '.join(sorted(USAGE_SOURCES))}")
    for name, value in (("cost_usd", cost), ("latency_ms", latency)):
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
            raise _Damaged(f"{name}={str(value)[:40]!r}: expected a number >= 0")
    return CachedReply(message=message, token_in=token_in, token_out=token_out, usage_source=source,
                       cost_usd=float(cost), latency_ms=float(latency))


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


def check_cache(settings: CacheSettings | None) -> None:
    """Open the cache ``settings`` name, when one is used, so a file that is no response cache is refused
    (:class:`CacheFileError`) before a sweep's first run rather than failing every run."""
    if settings is not None and settings.mode != "off":
        open_cache(settings.path)


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
