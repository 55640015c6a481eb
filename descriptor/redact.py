"""Keep secrets out of artifacts: every file the project writes, its logs and its checkpoints pass through here.

A secret is a key given in a config file (:func:`register_secret_value`), or the value (8+ characters) of an
environment variable that is

- registered with :func:`register_secret_env` (``mas`` registers every model
  route's ``api_key_env``, whatever it is called, when it reads a config),
- named like a secret (``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``CRED``,
  ``AUTH`` anywhere in the name), or
- shaped like a key (:func:`looks_like_key`: 20+ characters of a key's alphabet,
  letters and digits mixed);

plus any text shaped like ``sk-...`` or ``Bearer ...``, and the credentials of a URL: its userinfo
(``http://user:pw@host``) and query parameters named like a credential (``?api-key=``, ``&token=``,
``&sig=``, ...), whatever their value (:func:`redact_url_credentials`). Text and JSON become
``[REDACTED]``; binary data (checkpoints) is overwritten in place by ``*`` of
the same length (:func:`mask_secret_bytes`), which keeps its framing valid.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CRED|AUTH)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|sk-or-v1-[A-Za-z0-9]{16,}|Bearer\s+[A-Za-z0-9._\-]{16,})")
_KEY_SHAPES_BYTES = re.compile(_KEY_SHAPES.pattern.encode())
_KEY_ALPHABET = re.compile(r"[A-Za-z0-9_\-.+=]{20,}")
_GIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@?#\"'<>]+@")
_URL_QUERY_CREDENTIAL = re.compile(
    r"(?i)([?&;](?:[a-z0-9_\-]*(?:key|token|secret|passw(?:or)?d|pwd|auth|credential|signature)[a-z0-9_\-]*"
    r"|sig|code|session|sessionid)=)[^&#\s\"'<>]+")
_URL_USERINFO_BYTES = re.compile(_URL_USERINFO.pattern.encode())
_URL_QUERY_CREDENTIAL_BYTES = re.compile(_URL_QUERY_CREDENTIAL.pattern.encode())
REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
"""Shorter values are never treated as secrets (replacing them would mangle ordinary text)."""

_registered: set[str] = set()
_values: set[str] = set()
_cached: tuple[Any, list[str], list[str] | None] = (None, [], [])


def register_secret_env(names: Iterable[str | None]) -> None:
    """Treat the values of the environment variables ``names`` as secrets from now on (None entries are skipped).

    >>> register_secret_env(["MY_LLM_CRED"])
    """
    global _cached
    new = {n for n in names if n} - _registered
    if new:
        _registered.update(new)
        _cached = (None, [], [])  # recompute the table with the new names


def register_secret_value(value: str | None) -> None:
    """Treat ``value`` itself as a secret from now on (a key read from a config file, not from the environment).

    >>> register_secret_value("cfg-key-0123456789"); redact("key cfg-key-0123456789")
    'key [REDACTED]'
    """
    global _cached
    if value and len(value) >= MIN_SECRET_CHARS and value not in _values:
        _values.add(value)
        _cached = (None, [], [])


def registered_secret_env() -> frozenset[str]:
    """The names passed to :func:`register_secret_env` so far (a child process is started without them)."""
    return frozenset(_registered)


def looks_like_key(value: str) -> bool:
    """Whether an environment value is shaped like an API key: 20+ characters of ``[A-Za-z0-9_-.+=]`` with
    letters and digits, not a git object id.

    >>> looks_like_key("mk-3f9a8b7c6d5e4f3a2b1c0d9e"), looks_like_key("/usr/local/bin"), looks_like_key("C.UTF-8")
    (True, False, False)
    """
    return (_KEY_ALPHABET.fullmatch(value) is not None and any(c.isdigit() for c in value)
            and any(c.isalpha() for c in value) and _GIT_ID.fullmatch(value) is None)


def named_like_secret(name: str) -> bool:
    """Whether a key or variable name says it holds a secret (``apikey``, ``Api-Key``, ``HF_TOKEN``, ...).

    >>> named_like_secret("apikey"), named_like_secret("api-key"), named_like_secret("temperature")
    (True, True, False)
    """
    return _SECRET_NAME.search(name) is not None


def _is_secret(name: str, value: str) -> bool:
    return len(value) >= MIN_SECRET_CHARS and (name in _registered or _SECRET_NAME.search(name) is not None
                                               or looks_like_key(value))


def _secret_table() -> tuple[list[str], list[str] | None]:
    """Secret environment values (see the module docstring), longest first, and their JSON-escaped forms
    (None when one would not be escaped predictably), recomputed whenever the environment changes.

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
    # Longest first: a secret that contains another is replaced whole.
    values = sorted({v for k, v in os.environ.items() if _is_secret(k, v)} | _values, key=len, reverse=True)
    plain = all(not any(c in '"\\' or c < " " for c in v) for v in values)
    needles = [json.dumps(v, ensure_ascii=False)[1:-1] for v in values] if plain else None
    _cached = (key, values, needles)
    return values, needles


def secret_values() -> list[str]:
    """Every value treated as a secret now (environment and config keys), longest first."""
    return list(_secret_table()[0])


def secret_sources(text: str) -> list[str]:
    """Where the secrets that occur in ``text`` come from, by name (never by value): ``environment variable
    NAME`` for each such variable, and ``a key given in a config file``.

    >>> secret_sources("nothing here")
    []
    """
    found = [f"environment variable {k}" for k, v in sorted(os.environ.items()) if _is_secret(k, v) and v in text]
    return found + (["a key given in a config file"] if any(v in text for v in _values) else [])


def may_hold_secret(text: str) -> bool:
    """Whether the JSON text ``text`` may hold a secret value or a key shape (False: :func:`redact` would
    change nothing in the data it was serialized from).

    A few substring searches over one string, against a walk over every string of the data: the tracer
    serializes each event anyway and redacts only when this says so.
    """
    _values, needles = _secret_table()
    if needles is None:  # a secret with quotes, backslashes or control characters: always redact
        return True
    return "sk-" in text or "Bearer" in text or "://" in text or any(n in text for n in needles)


def url_credentials(url: str) -> list[str]:
    """The credentials a URL carries as values: its userinfo (the user and the password, and both decoded) and its
    query parameters named like a credential, so they can be registered as secrets (:func:`register_secret_value`):
    a server that echoes one alone, outside any URL, would otherwise have it written out.

    >>> url_credentials("http://bob:p%40ss@host/v1?api-key=abc123xyz&model=m")
    ['bob:p%40ss', 'p%40ss', 'p@ss', 'abc123xyz']
    """
    from urllib.parse import parse_qsl, unquote, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        found.append(userinfo)
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found += [password, unquote(password)]
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if _URL_QUERY_CREDENTIAL.search(f"?{name}=x"):
            found.append(value)
    return list(dict.fromkeys(v for v in found if v))


def redact_url_credentials(text: str) -> str:
    """``text`` with every URL's userinfo and credential-named query parameters replaced by ``[REDACTED]``.

    >>> redact_url_credentials("http://bob:pw@host:8/v1?api-key=abc&model=m")
    'http://[REDACTED]@host:8/v1?api-key=[REDACTED]&model=m'
    """
    if "://" not in text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    if "=" in text:
        text = _URL_QUERY_CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, text)
    return text


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
        return redact_url_credentials(value)
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


def mask_secret_bytes(data: bytes) -> bytes:
    """``data`` with every secret and key shape overwritten by ``*`` of the same length (binary formats such
    as msgpack, whose length prefixes must stay right).

    >>> mask_secret_bytes(b"auth=Bearer abcdefghijklmnopqrstu;")
    b'auth=****************************;'
    """
    values, _ = _secret_table()
    for v in values:
        for form in {v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1]}:
            b = form.encode("utf-8")
            if b in data:
                data = data.replace(b, b"*" * len(b))
    if b"sk-" in data or b"Bearer" in data:
        data = _KEY_SHAPES_BYTES.sub(lambda m: b"*" * len(m.group()), data)
    if b"://" in data:
        data = _URL_USERINFO_BYTES.sub(lambda m: m.group(1) + b"*" * (len(m.group()) - len(m.group(1)) - 1) + b"@",
                                       data)
        data = _URL_QUERY_CREDENTIAL_BYTES.sub(lambda m: m.group(1) + b"*" * (len(m.group()) - len(m.group(1))),
                                               data)
    return data


def structlog_redactor(_logger: Any, _name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor applying :func:`redact` to every log record."""
    return redact(event_dict)
