"""Stopping the real servers tests start (Phoenix, ``langgraph dev``) by their PID."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, *, timeout_s: float) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session=True``, so the server's workers
    are in it), wait ``timeout_s``, then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
