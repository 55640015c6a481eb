"""structlog set-up: human-readable on a terminal, one JSON object per line otherwise."""

from __future__ import annotations

import logging
import sys

import structlog

from descriptor.redact import structlog_redactor


def configure_logging(level: str = "INFO") -> None:
    """Configure structlog once for the CLI; library code only calls ``structlog.get_logger``."""
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
        # Resolve sys.stderr per logger: it may be swapped (pytest capture, redirection).
        logger_factory=lambda *_: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
