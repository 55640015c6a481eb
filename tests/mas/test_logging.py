"""Logging: a logger is configured when first used, writes to ``sys.stderr`` as it is when a record is written, and
redacts secrets; a command runs with the real stdout and excepthook, and the console script prints a crash redacted.

Tests run commands in-process (``main.main``), which set logging up while pytest captured that test's stderr; a
handler that kept the captured stream after pytest closed it made every later record of the session (from any
thread) print a "Logging error" traceback, ``ValueError: I/O operation on closed file``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import uuid

import pytest
import structlog

from descriptor.redact import REDACTED
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


def test_a_logger_used_before_any_set_up_is_configured_then_stderr_json_and_redacted():
    secret = "zz9" + uuid.uuid4().hex + "Q"  # shaped like a key: a secret wherever it appears
    probe = ("import sys\nfrom mas.logging import get_logger\n"
             f"get_logger('m').warning('hello', k={secret!r})\nget_logger('m').debug('not shown')\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "SOME_SETTING": secret})
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    record = json.loads(line)
    assert (record["event"], record["k"], record["level"]) == ("hello", REDACTED, "warning")


def test_a_command_runs_with_the_real_stdout_and_excepthook(monkeypatch, capsys):
    import benchmark.registry
    from mas_econ.cli import main

    seen = []
    monkeypatch.setattr(benchmark.registry, "list_benchmarks", lambda: seen.append((sys.stdout, sys.excepthook)) or [])
    stdout, hook = sys.stdout, sys.excepthook
    assert main(["list-benchmarks"]) == 0
    assert seen == [(stdout, hook)] and sys.excepthook is hook


def test_the_console_script_prints_a_crash_redacted_and_exits_1(monkeypatch, capsys):
    import mas_econ.cli as cli

    secret = "zz9" + uuid.uuid4().hex + "Q"
    monkeypatch.setenv("SOME_SETTING", secret)

    def crash(**_kw):
        raise RuntimeError(f"upstream said 401 for key {secret}")

    monkeypatch.setattr(cli, "main", crash)
    with pytest.raises(SystemExit) as done:
        cli.console()
    err = capsys.readouterr().err
    assert done.value.code == 1
    assert "Traceback (most recent call last)" in err and f"RuntimeError: upstream said 401 for key {REDACTED}" in err
    assert secret not in err
