"""Logs go to ``sys.stderr`` as it is when they are written, not as it was when logging was set up.

Tests run commands in-process (``main.main``), which set logging up while pytest captured that test's stderr; the
handler kept the captured stream after pytest closed it, and every later record of the session (from any thread)
printed a "Logging error" traceback, ``ValueError: I/O operation on closed file`` (issue 30).
"""

from __future__ import annotations

import io
import logging
import sys

import structlog

from mas.logging import configure_logging


def test_logs_reach_the_current_stderr_after_the_one_they_were_set_up_with_closed(monkeypatch):
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging()
    bound = structlog.get_logger("t").bind(k=1)  # a bound logger keeps its output object
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("some.library").warning("library says %s", "hi")
    bound.warning("bound says hi")
    out = second.getvalue()
    assert "library says hi" in out and "bound says hi" in out
    assert "Logging error" not in out
