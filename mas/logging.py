"""Logging set-up: structlog human-readable on a terminal, one JSON object per line otherwise; secrets redacted.

Every route to stderr passes :mod:`descriptor.redact`: structlog records (a
processor), the standard library's loggers (httpx, openai, dask, ...) and
``warnings`` (a formatter on the root handler), and the tracebacks of
uncaught exceptions (:func:`install_redacting_excepthook`). The CLI also
wraps stdout and stderr themselves (:func:`redacted_std_streams`), so no
``print`` of a command can show a key either.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator
from types import ModuleType, TracebackType
from typing import Any, TextIO

from descriptor.redact import redact, structlog_redactor


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message, arguments and traceback) has secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to ``sys.stderr`` as it is when a record is emitted.

    ``logging.StreamHandler()`` keeps the stream it was made with: made while
    pytest captured a test's stderr (or while :func:`redacted_std_streams`
    wrapped it), it wrote to that stream after it was closed, and every later
    record printed a "Logging error" traceback (``ValueError: I/O operation on
    closed file``) from whichever thread logged.
    """

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass  # always the current sys.stderr


class _StderrLogger:
    """structlog's ``PrintLogger`` to ``sys.stderr`` as it is at each call (a bound logger outlives a swap)."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = fatal = failure = err = error = critical = exception = msg


def _configure_structlog(structlog: ModuleType, level: str) -> None:
    renderer = (
        structlog.dev.ConsoleRenderer(colors=False)
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog_redactor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=lambda *_: _StderrLogger(),
        cache_logger_on_first_use=False,
    )


_WANTED: str | None = None
"""The level :func:`configure_logging` asked for (None: never called; structlog keeps its own defaults)."""
_APPLIED: str | None = None
"""The level structlog was last configured with by this module."""


def _structlog() -> ModuleType:
    """structlog, configured as :func:`configure_logging` asked the first time it is needed."""
    global _APPLIED
    import structlog

    if _WANTED is not None and _APPLIED != _WANTED:
        _configure_structlog(structlog, _WANTED)
        _APPLIED = _WANTED
    return structlog


class _Logger:
    """A structlog logger made on first use (:func:`get_logger`)."""

    __slots__ = ("_name", "_inner")

    def __init__(self, name: str) -> None:
        self._name, self._inner = name, None

    def __getattr__(self, attr: str) -> Any:  # info, warning, bind, ...
        if self._inner is None:
            self._inner = _structlog().get_logger(self._name)
        return getattr(self._inner, attr)


def get_logger(name: str) -> Any:
    """The project's logger for module ``name`` (structlog's, with its methods: ``info``, ``warning``, ``bind``).

    structlog is imported, and configured as :func:`configure_logging` asked, when the logger is first used.
    Why: importing structlog costs ~0.3 s of CPU (it loads rich for tracebacks), a third of the start-up of a
    command that never logs through it (``summarize-experiment``, ``report``) (issue 33).
    """
    return _Logger(name)


def configure_logging(level: str = "INFO") -> None:
    """Configure structlog and the standard library's logging once for the CLI; library code only calls
    :func:`get_logger`. structlog is configured when a logger is first used (at once if it is already imported:
    a caller of ``structlog.get_logger`` then gets the same set-up)."""
    global _WANTED, _APPLIED
    _WANTED, _APPLIED = level, None
    if "structlog" in sys.modules:
        _structlog()
    handler = _StderrHandler()
    handler.setFormatter(RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_mas_redacting", False)]:
        root.removeHandler(old)
    handler._mas_redacting = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    install_redacting_excepthook()


def _redacting_excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    sys.stderr.write(redact("".join(traceback.format_exception(exc_type, exc, tb))))


def install_redacting_excepthook() -> None:
    """Print uncaught exceptions' tracebacks with secrets redacted (an error body may quote a key)."""
    sys.excepthook = _redacting_excepthook


class RedactingStream:
    """A text stream that redacts what is written to it before passing it on (``isatty``, ``fileno``... pass)."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.contextmanager
def redacted_std_streams() -> Iterator[None]:
    """Redact everything written to ``sys.stdout`` and ``sys.stderr`` inside (restored afterwards)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
