"""Logs go to ``sys.stderr`` as it is when they are written, not as it was when logging was set up.

Tests run commands in-process (``main.main``), which set logging up while pytest captured that test's stderr; the
handler kept the captured stream after pytest closed it, and every later record of the session (from any thread)
printed a "Logging error" traceback, ``ValueError: I/O operation on closed file`` (issue 30).
"""

from __future__ import annotations

import io
import json
import logging
import subprocess
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


def test_a_module_logger_imports_structlog_at_its_first_record_and_logs_as_configured():
    probe = ("import sys\nfrom mas.logging import configure_logging, get_logger\nlog = get_logger('m')\n"
             "configure_logging()\nassert 'structlog' not in sys.modules\nlog.warning('hello', k=1)\n"
             "log.debug('not shown')\nprint('structlog' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    (line,) = out.stderr.splitlines()  # INFO level: the debug record is dropped
    record = json.loads(line)  # off a terminal: one JSON object a line
    assert (record["event"], record["k"], record["level"]) == ("hello", 1, "warning")
