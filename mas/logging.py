"""Logging: structlog, human-readable on a terminal and one JSON object a line otherwise, secrets redacted.

Library code calls :func:`get_logger` only; structlog is imported and configured the first time a logger is
used. Why then: importing structlog costs ~0.3 s of CPU (it loads rich for tracebacks), a third of the start-up
of a command that never logs through it (``summarize-experiment``, ``report``).

Records pass :mod:`descriptor.redact` on their way to stderr: structlog's through a processor, the standard
library's (httpx, openai, dask, ...) and ``warnings`` through the formatter :func:`configure_logging` puts on the
root logger. Text a command prints itself is redacted where it is made (an error's message, a URL), and a
crash's traceback by the process's entry point (:func:`redacted_traceback`).
"""

from __future__ import annotations

import logging
import sys
import traceback
from types import ModuleType
from typing import Any, TextIO

from descriptor.redact import redact, structlog_redactor

_level = "INFO"
"""The level structlog is configured with (:func:`configure_logging` sets it)."""


def get_logger(name: str) -> Any:
    """The logger of module ``name`` (structlog's, with its methods: ``info``, ``warning``, ``bind``); structlog
    is imported and configured when it is first used."""
    return _Logger(name)


class _Logger:
    __slots__ = ("_name", "_inner")

    def __init__(self, name: str) -> None:
        self._name, self._inner = name, None

    def __getattr__(self, attr: str) -> Any:  # info, warning, bind, ...
        if self._inner is None:
            self._inner = _structlog().get_logger(self._name)
        return getattr(self._inner, attr)


def _structlog() -> ModuleType:
    """structlog, configured unless something already configured it (``configure_logging``, a test's
    ``structlog.testing.capture_logs``)."""
    import structlog

    if not structlog.is_configured():
        _configure(structlog)
    return structlog


def _configure(structlog: ModuleType) -> None:
    renderer = (structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty()
                else structlog.processors.JSONRenderer())
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog_redactor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(_level)),
        logger_factory=lambda *_: _StderrLogger(),
        cache_logger_on_first_use=False,
    )


def configured_level() -> str:
    """The level structlog logs at in this process (:func:`configure_logging`), for a worker process to log as its
    parent does."""
    return _level


def configure_logging(level: str = "INFO") -> None:
    """Set the level and send the standard library's records and ``warnings`` to stderr, redacted (the command
    line calls this once). structlog takes the level when first used, at once if it is already imported."""
    global _level
    _level = level
    if "structlog" in sys.modules:
        _configure(sys.modules["structlog"])
    handler = _StderrHandler()
    handler.setFormatter(RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    logging.captureWarnings(True)


def redacted_traceback() -> str:
    """The traceback of the exception being handled, as Python prints it, with secrets redacted (an error's
    message may quote a key or a URL's password): what a process's entry point prints when it crashes."""
    return redact(traceback.format_exc())


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message, arguments and traceback) has secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to ``sys.stderr`` as it is when a record is emitted.

    ``logging.StreamHandler()`` keeps the stream it was made with: made while pytest captured a test's stderr,
    it wrote to that stream after it was closed, and every later record printed a "Logging error" traceback
    (``ValueError: I/O operation on closed file``) from whichever thread logged.
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
