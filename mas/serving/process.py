"""The llama-server process and its run files: liveness by PID, the record, users, health.

Plain functions shared by :mod:`mas.serving.server` (lifecycle) and its tests.
Liveness reads ``/proc`` so a zombie or a recycled PID of another program
never counts as a running server, and nothing is ever signalled by name.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from pydantic import BaseModel, ValidationError

from descriptor.errors import UserError
from descriptor.io import write_text_atomic
from mas.logging import get_logger
from mas.serving.catalogue import CachePaths

log = get_logger(__name__)

POLL_S = 0.25  # readiness poll interval (s)
STOP_TIMEOUT_S = 10.0  # SIGTERM grace before SIGKILL (s)


class EmbeddedServerError(UserError):
    """The local model server is not running, crashed, or never became ready.

    A :class:`UserError`, so the CLI prints the message (exit code, log tail)
    on one line and exits 2 instead of showing a traceback: the fix is on the
    user's side (memory, a stale server, a bad build), not in the code.
    """


class ServerRecord(BaseModel):
    """Contents of ``<cache>/run/server.json``."""

    pid: int
    host: str
    port: int
    base_url: str
    """Endpoint root ending in ``/v1``."""
    model: str
    """Name the server advertises and clients send."""
    model_path: str
    started_at: str
    """ISO 8601 UTC time the server became ready."""
    ctx_size: int
    """Total KV-cache tokens; each slot gets ``ctx_size // parallel``."""
    parallel: int
    threads: int
    persistent: bool = False
    """True for ``model serve``: no run stops it, only ``model stop``."""
    log_path: str


# ---------------------------------------------------------------- processes


def any_pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists and is not a zombie (an exited, unreaped child)."""
    try:
        # The state letter follows the ")" closing the command name.
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def pid_alive(pid: int) -> bool:
    """True when ``pid`` is a live llama-server; a recycled PID of another program is not."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"llama-server" in cmdline and any_pid_alive(pid)


def terminate(pid: int, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM ``pid`` if it is a llama-server, wait, then SIGKILL; reap it if it is our child."""
    if not pid_alive(pid):
        if proc is not None:
            proc.poll()
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return
        if not pid_alive(pid):
            return
        time.sleep(0.05)
    log.warning("embedded_server_kill", pid=pid)
    os.kill(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait(timeout=5)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def log_tail(path: Path, start: int = 0, lines: int = 15) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


# ------------------------------------------------------------ record & users


@contextmanager
def locked(paths: CachePaths) -> Iterator[None]:
    """Hold ``<cache>/run/server.lock`` (an flock, released if the process dies)."""
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    with paths.server_lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_record(paths: CachePaths) -> ServerRecord | None:
    """The recorded server, or None when there is no (readable) record."""
    try:
        return ServerRecord.model_validate_json(paths.server_record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValidationError, ValueError) as err:
        log.warning("embedded_server_record_unreadable", path=str(paths.server_record), error=str(err)[:200])
        return None


def write_record(paths: CachePaths, rec: ServerRecord) -> None:
    write_text_atomic(paths.server_record, rec.model_dump_json(indent=1))


def clear_record(paths: CachePaths, pid: int) -> None:
    """Remove the record and user marks if they still describe ``pid``."""
    rec = read_record(paths)
    if rec is None or rec.pid == pid:
        paths.server_record.unlink(missing_ok=True)
        for mark in users_dir(paths).glob("*"):
            mark.unlink(missing_ok=True)


def users_dir(paths: CachePaths) -> Path:
    return paths.run_dir / "users"


def register_user(paths: CachePaths, pid: int) -> None:
    d = users_dir(paths)
    d.mkdir(parents=True, exist_ok=True)
    (d / str(pid)).touch()


def unregister_user(paths: CachePaths, pid: int) -> None:
    (users_dir(paths) / str(pid)).unlink(missing_ok=True)


def live_users(paths: CachePaths) -> list[int]:
    """PIDs of processes still registered as users; marks of dead processes are removed."""
    live = []
    for mark in users_dir(paths).glob("*"):
        if mark.name.isdigit() and any_pid_alive(int(mark.name)):
            live.append(int(mark.name))
        else:
            mark.unlink(missing_ok=True)
    return live


# ------------------------------------------------------------------ health


def _root(base_url: str) -> str:
    return base_url.removesuffix("/").removesuffix("/v1")


def is_healthy(base_url: str, timeout_s: float = 2.0) -> bool:
    """True when ``/health`` says ok (the model is loaded) and ``/v1/models`` answers 200.

    ``/v1/models`` alone is not enough: it answers 200 while the model is
    still loading, when ``/health`` still says 503.
    """
    root = _root(base_url)
    try:
        with httpx.Client(timeout=timeout_s) as client:
            return (
                client.get(f"{root}/health").status_code == 200 and client.get(f"{root}/v1/models").status_code == 200
            )
    except httpx.HTTPError:
        return False


def poll_healthy(rec: ServerRecord, proc: subprocess.Popen | None, timeout_s: float, *,
                 health_timeout_s: float = 2.0) -> str:
    """Poll the server of ``rec`` for up to ``timeout_s``: ``ready`` once healthy, ``exited`` as soon as its
    process is gone, ``timeout`` otherwise (each check waits ``health_timeout_s`` for an answer)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None if proc is not None else not pid_alive(rec.pid):
            return "exited"
        if is_healthy(rec.base_url, timeout_s=health_timeout_s):
            return "ready"
        time.sleep(POLL_S)
    return "timeout"


def wait_ready(rec: ServerRecord, proc: subprocess.Popen | None, timeout_s: float, log_start: int) -> None:
    """Poll until healthy; raise early if the process dies, and on timeout."""
    state = poll_healthy(rec, proc, timeout_s)
    if state == "ready":
        return
    if state == "exited":
        code = proc.returncode if proc is not None else "unknown"
        raise EmbeddedServerError(
            f"llama-server (pid {rec.pid}) exited with code {code} while starting; last log lines from "
            f"{rec.log_path}:\n{log_tail(Path(rec.log_path), log_start)}"
        )
    raise EmbeddedServerError(
        f"llama-server (pid {rec.pid}) at {rec.base_url} was not ready after {timeout_s:.0f} s "
        f"(embedded.startup_timeout_s); last log lines from {rec.log_path}:\n"
        f"{log_tail(Path(rec.log_path), log_start)}"
    )
