"""Run untrusted (model-written) Python in an isolated child process with time, memory and output limits.

Threat model
------------
Code written by a model is hostile: it may try to read the sweep's secrets
(API keys in the parent's environment, ``/proc/<ppid>/environ``), signal or
kill the sweep (``os.kill``, ``pidfd_send_signal``), write outside its
sandbox (``open``, ``sqlite3``, patched ``builtins``), reach the network,
or exhaust CPU, memory, processes or disk. The sweep's measurements and
files must survive all of that, and nothing it does may outlive it.

``isolation = "namespaces"`` (the default) is the boundary. The child is
started by ``unshare`` (util-linux) in its own user, PID, network, mount,
IPC and UTS namespaces, and sees (see :mod:`benchmark.sandbox.child`):

- a private ``/proc`` showing only its own processes: the sweep and every
  other process on the machine are invisible and unreachable (no
  ``/proc/<pid>/environ``, no pid to signal or ``pidfd_open``);
- a read-only root made of ``/usr`` (and the ``/bin``, ``/lib*`` links),
  a few ``/etc`` files the dynamic linker and libc read, the Python
  installation with every ``site-packages`` hidden (only numpy and scipy
  are importable: :mod:`benchmark.sandbox.view`), and ``/dev/null``,
  ``zero``, ``full``, ``random``, ``urandom``; nothing else of the host (no
  home directories, no artifacts, no project checkout, no benchmark data);
- one writable directory, ``/tmp`` (also ``HOME``, ``TMPDIR`` and the
  working directory): a tmpfs of :data:`TMP_BYTES` that lives in memory and
  vanishes with the sandbox, so nothing it writes reaches the host disk;
- a network namespace with only a loopback interface that is down;
- no capabilities (bounding set emptied, ``no_new_privs``), no file
  descriptors of the parent but stdin/stdout/stderr (in-memory files), and a
  clean environment (no variable of the parent).

PID 1 of the namespace is the sandbox's own init; when it ends, the kernel
kills every process left in the namespace. The process tree dies with the
evaluation (the wall-clock timeout kills it) and with its parent:
``PR_SET_PDEATHSIG`` chains parent -> ``unshare`` -> init -> code, so a
``kill -9`` of the sweep leaves no orphan and no temp directory.

Inside the child the earlier limits still apply as defence in depth:
``RLIMIT_AS`` = ``memory_mb`` (``MemoryError``), ``RLIMIT_CPU`` = timeout +
1 s, ``RLIMIT_FSIZE`` = 32 MiB per file (stdout/stderr too: a runaway print
loop ends in ``OSError: File too large``), ``RLIMIT_NPROC`` = 0 (not
enforced for root), ``RLIMIT_CORE`` = 0, and an audit hook that refuses
network use, new processes, signals, ``ctypes``, ``gc`` introspection,
tracing and writes (``open``, ``os.*``, ``shutil``, ``sqlite3``) outside the
working directory. The hook binds every name it uses at install time, so
patching ``builtins`` does not change it.

Not covered: CPU-heavy loops until the timeout; reading the standard
library and system files; kernel exploits (no seccomp filter is installed).
A verdict printed by the code itself is forgeable: code benchmarks judge in
a separate sandbox (:mod:`benchmark.sandbox.remote`). When user namespaces are
unavailable (some containers, ``kernel.unprivileged_userns_clone=0``) or a
step of building the view fails (the message names the step first),
``namespaces`` refuses to run code (:class:`SandboxUnavailable`); the user
may opt into ``isolation = "unsafe-no-namespaces"``: the same limits and
audit hook in a plain child process, which is NOT a security boundary (CPython says so of
audit hooks): the code can read any file the user can and see other processes.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import benchmark.sandbox.view as view
from descriptor.errors import UserError

Isolation = Literal["namespaces", "unsafe-no-namespaces"]
ISOLATION_MODES: tuple[str, ...] = ("namespaces", "unsafe-no-namespaces")

MAX_OUTPUT_CHARS = 20_000
"""Each of stdout/stderr is cut to about this many characters (head and tail kept, a note between)."""
FILE_SIZE_LIMIT_BYTES = 32 * 1024 * 1024
"""``RLIMIT_FSIZE`` in the child: the largest file (including stdout/stderr) it may write."""
TMP_BYTES = 64 * 1024 * 1024
"""Size of the sandbox's private ``/tmp`` (namespaces mode), in bytes."""
SANDBOX_TMP = "/tmp"
"""The writable working directory as the isolated code sees it."""

_CHILD_SOURCE = (Path(__file__).parent / "child.py").read_text(encoding="utf-8")
_ISOLATION_FAILED = 121  # benchmark.sandbox.child.ISOLATION_FAILED
_UNSHARE_ARGS = ("--user", "--map-root-user", "--pid", "--net", "--mount", "--ipc", "--uts", "--fork",
                 "--kill-child=SIGKILL")
_STALE_PREFIX = "mas-sandbox-"

_SIGNAL_NOTES = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGXFSZ: f"file size limit exceeded ({FILE_SIZE_LIMIT_BYTES // 2**20} MiB; output too large?)",
    signal.SIGKILL: "killed",
    signal.SIGSEGV: "segmentation fault",
}


class SandboxUnavailable(UserError):
    """Namespace isolation cannot be set up here, so untrusted code is not run (see the module docstring)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class SandboxResult:
    """What one sandboxed run produced."""

    ok: bool
    """Exit code 0 and no timeout."""
    stdout: str
    """Captured stdout, cut to ``MAX_OUTPUT_CHARS``."""
    stderr: str
    """Captured stderr (tracebacks, sandbox notes), cut to ``MAX_OUTPUT_CHARS``."""
    exit_code: int | None
    """Process exit code; negative = killed by that signal; None if it never started."""
    timed_out: bool
    """The wall-clock timeout fired and the process tree was killed."""
    duration_ms: float
    """Wall-clock time from spawn to reap, in ms."""
    limit: str | None = None
    """Which limit ended the run, if one did: timeout, memory, cpu, file_size."""
    isolation: str = "namespaces"
    """How the code was isolated (``namespaces`` or ``unsafe-no-namespaces``)."""


def _child_env(work: str) -> dict[str, str]:
    """A clean environment: nothing inherited, so no secrets reach the child."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": work,
        "TMPDIR": work,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # BLAS libraries start one thread per core at import; keep numpy cheap under RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _die_with_parent_hook() -> object:
    """A ``preexec_fn`` making the child get SIGKILL when this process (the spawning thread) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the prctl: nobody would kill us
            os._exit(1)

    return hook


def memfd(name: str, data: bytes = b"") -> int:
    """An in-memory file (close-on-exec) holding ``data``, read from its start: a child's code, input or output."""
    fd = os.memfd_create(f"mas-sandbox-{name}", os.MFD_CLOEXEC)
    if data:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


@dataclass(kw_only=True, slots=True)
class Prepared:
    """One sandboxed run ready to spawn (:func:`prepare`): its argv, environment and file descriptors."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    isolation: str
    stdin_fd: int
    out_fd: int
    err_fd: int
    pass_fds: tuple[int, ...]
    status_r: int | None = None
    host_dir: Path | None = None
    """Unsafe mode only: the working directory on the host (removed afterwards)."""
    fds: list[int] = field(default_factory=list)

    def spawn_kwargs(self) -> dict[str, object]:
        return {"stdin": self.stdin_fd, "stdout": self.out_fd, "stderr": self.err_fd, "cwd": self.cwd,
                "env": self.env, "start_new_session": True, "close_fds": True, "pass_fds": self.pass_fds,
                "preexec_fn": _die_with_parent_hook()}

    def after_spawn(self) -> None:
        """Close the parent's copies of the fds only the child needs (the code, the status pipe's write end)."""
        for fd in self.pass_fds:
            if fd in self.fds:  # extra fds belong to the caller
                os.close(fd)
                self.fds.remove(fd)

    def release(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()
        if self.host_dir is not None:
            shutil.rmtree(self.host_dir, ignore_errors=True)


def prepare(code: str, timeout_s: float, memory_mb: int, stdin: str | None, isolation: str,
            extra_fds: tuple[int, ...] = ()) -> Prepared:
    """Everything to spawn one sandboxed run; ``extra_fds`` are passed to the code as they are (pipes to a peer)."""
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if memory_mb < 32:
        raise ValueError(f"memory_mb must be >= 32, got {memory_mb}")
    if isolation not in ISOLATION_MODES:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATION_MODES)}, got {isolation!r}")
    isolate = isolation == "namespaces"
    unshare = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin") if isolate else None
    mountpoint = view.mountpoint(view.ro_binds()) if isolate else None
    if isolate and (unshare is None or mountpoint is None):
        missing = "the unshare program (util-linux) is not installed" if unshare is None else \
            f"no directory to mount the sandbox root on (tried {', '.join(view.MOUNTPOINTS)})"
        raise SandboxUnavailable(_unavailable_message(missing))
    fds: list[int] = []
    try:
        code_fd = memfd("code", code.encode("utf-8"))
        fds.append(code_fd)
        stdin_fd = memfd("stdin", stdin.encode("utf-8")) if stdin is not None else os.open(os.devnull, os.O_RDONLY)
        fds.append(stdin_fd)
        out_fd, err_fd = memfd("stdout"), memfd("stderr")
        fds += [out_fd, err_fd]
        status_r = status_w = None
        host_dir = None
        if isolate:
            status_r, status_w = os.pipe()
            fds += [status_r, status_w]
            os.set_blocking(status_r, False)
            work, cwd = SANDBOX_TMP, "/"
        else:
            _clean_stale_dirs()
            host_dir = Path(tempfile.mkdtemp(prefix=f"{_STALE_PREFIX}{os.getpid()}-")).resolve()
            work = cwd = str(host_dir)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    spec = {"isolate": isolate, "code_fd": code_fd, "status_fd": status_w, "work": work,
            "mem": memory_mb * 2**20, "cpu": int(timeout_s) + 1, "fsize": FILE_SIZE_LIMIT_BYTES,
            "mountpoint": mountpoint, "ro_binds": list(view.ro_binds()) if isolate else [],
            "masks": list(view.masked_dirs()) if isolate else [],
            "package_binds": list(view.package_binds()) if isolate else [],
            "path": [view.SANDBOX_SITE] if isolate else view.host_package_path(), "tmp_bytes": TMP_BYTES}
    # -S: no site-packages on sys.path (and no .pth files run at start, which cost ~60 ms here)
    argv = [sys.executable, "-I", "-S", "-B", "-c", _CHILD_SOURCE, json.dumps(spec)]
    if isolate:
        argv = [unshare, *_UNSHARE_ARGS, *argv]
    pass_fds = ((code_fd,) if status_w is None else (code_fd, status_w)) + tuple(extra_fds)
    return Prepared(argv=argv, env=_child_env(work), cwd=cwd, isolation=isolation, stdin_fd=stdin_fd,
                    out_fd=out_fd, err_fd=err_fd, pass_fds=pass_fds, status_r=status_r, host_dir=host_dir, fds=fds)


def _clean_stale_dirs() -> None:
    """Remove working directories (unsafe mode) left by sandbox parents that were killed."""
    root = Path(tempfile.gettempdir())
    for d in root.glob(f"{_STALE_PREFIX}*-*"):
        owner = d.name[len(_STALE_PREFIX):].split("-", 1)[0]
        if not owner.isdigit():
            continue
        try:
            os.kill(int(owner), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:  # alive, another user's
            pass


def _read_capped(fd: int) -> str:
    """The in-memory file's text, or its head and tail around a note when longer than ``MAX_OUTPUT_CHARS``.

    The tail is kept because that is where tracebacks and final results are.
    """
    half = MAX_OUTPUT_CHARS // 2
    size = os.fstat(fd).st_size
    if size <= MAX_OUTPUT_CHARS * 4:  # a UTF-8 char is at most 4 bytes
        text = os.pread(fd, size, 0).decode("utf-8", errors="replace")
        if len(text) <= MAX_OUTPUT_CHARS:
            return text
        head = tail = text
    else:
        head = os.pread(fd, half * 4, 0).decode("utf-8", errors="replace")
        tail = os.pread(fd, half * 4, size - half * 4).decode("utf-8", errors="replace")
    return head[:half] + f"\n[sandbox: output truncated, {size:,} bytes in all]\n" + tail[-half:]


def _status(prep: Prepared) -> bytes:
    """What the isolated init reported (``S`` set up, ``X<wait status>``); empty in unsafe mode."""
    if prep.status_r is None:
        return b""
    chunks = []
    try:
        while chunk := os.read(prep.status_r, 64):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks)


def finish(prep: Prepared, returncode: int | None, timed_out: bool, start: float,
           timeout_s: float, memory_mb: int, *, ended_by_parent: bool = False) -> SandboxResult:
    """The run's result; ``ended_by_parent``: killed because its work was done (no limit, no isolation check)."""
    duration_ms = (time.perf_counter() - start) * 1000.0
    try:
        stdout, stderr = _read_capped(prep.out_fd), _read_capped(prep.err_fd)
        status = _status(prep)
    finally:
        prep.release()
    exit_code = returncode
    if prep.isolation == "namespaces":
        if not status.startswith(b"S") and not timed_out and not ended_by_parent:
            raise SandboxUnavailable(_unavailable_message(stderr.strip().splitlines()[-1] if stderr.strip()
                                                          else f"exit status {returncode}"))
        if b"X" in status:
            exit_code = os.waitstatus_to_exitcode(int(status.split(b"X", 1)[1]))
    limit = None
    if ended_by_parent:
        pass
    elif timed_out:
        limit = "timeout"
        stderr += f"\n[sandbox: wall-clock timeout after {timeout_s:g} s; process tree killed]\n"
    elif exit_code is not None and exit_code < 0:
        sig = -exit_code
        limit = {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "file_size"}.get(sig)
        stderr += f"\n[sandbox: terminated by signal {sig}: {_SIGNAL_NOTES.get(sig, 'signal')}]\n"
    elif exit_code and "MemoryError" in stderr[-2000:]:
        limit = "memory"
        stderr += f"\n[sandbox: memory limit {memory_mb} MB reached]\n"
    elif exit_code and "File too large" in stderr[-2000:]:  # CPython ignores SIGXFSZ: writes get EFBIG
        limit = "file_size"
        stderr += f"\n[sandbox: {_SIGNAL_NOTES[signal.SIGXFSZ]}]\n"
    return SandboxResult(ok=exit_code == 0 and not timed_out, stdout=stdout, stderr=stderr,
                         exit_code=exit_code, timed_out=timed_out, duration_ms=duration_ms, limit=limit,
                         isolation=prep.isolation)


def kill_tree(pid: int) -> None:
    """SIGKILL the sandboxed process ``pid`` and everything it started."""
    # The child leads its session (start_new_session), so its pgid is its pid; in namespaces mode,
    # killing unshare and the init kills the whole PID namespace.
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_for_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """``proc.wait(timeout_s)``, woken by the exit itself (a pidfd) instead of ``Popen.wait``'s polling, which
    added up to 50 ms to every call."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:  # kernel before 5.3
        proc.wait(timeout=timeout_s)
        return
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout_s)
    finally:
        os.close(pidfd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout_s)
    proc.wait()


def run_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512, stdin: str | None = None,
               isolation: Isolation = "namespaces") -> SandboxResult:
    """Run ``code`` in a sandboxed interpreter; ``timeout_s`` wall clock (s), ``memory_mb`` address space (MB).

    Raises :class:`SandboxUnavailable` when ``isolation="namespaces"`` cannot be set up.

    >>> run_python("print(6 * 7)").stdout
    '42\\n'
    """
    prep = prepare(code, timeout_s, memory_mb, stdin, isolation)
    start = time.perf_counter()
    timed_out = False
    try:
        proc = subprocess.Popen(prep.argv, **prep.spawn_kwargs())  # type: ignore[call-overload]
        prep.after_spawn()
        try:
            wait_for_exit(proc, timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_tree(proc.pid)
            proc.wait()
        finally:
            if proc.returncode is None:  # interrupted (KeyboardInterrupt): never leak the child
                kill_tree(proc.pid)
                proc.wait()
    except BaseException:
        prep.release()
        raise
    return finish(prep, proc.returncode, timed_out, start, timeout_s, memory_mb)


async def arun_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512, stdin: str | None = None,
                      isolation: Isolation = "namespaces") -> SandboxResult:
    """Async :func:`run_python` on asyncio subprocesses (does not block the event loop while waiting)."""
    prep = prepare(code, timeout_s, memory_mb, stdin, isolation)
    start = time.perf_counter()
    timed_out = False
    proc = None
    try:
        proc = await asyncio.create_subprocess_exec(*prep.argv, **prep.spawn_kwargs())  # type: ignore[arg-type]
        prep.after_spawn()
        try:
            await asyncio.wait_for(proc.wait(), timeout=timeout_s)
        except TimeoutError:
            timed_out = True
            kill_tree(proc.pid)
            await proc.wait()
    except BaseException:
        # Cancelled or failed: kill the child and clean up before propagating.
        if proc is not None and proc.returncode is None:
            kill_tree(proc.pid)
            try:
                await asyncio.shield(proc.wait())
            except BaseException:
                pass
        prep.release()
        raise
    return finish(prep, proc.returncode, timed_out, start, timeout_s, memory_mb)


def _unavailable_message(reason: str) -> str:
    """What failed first (the exact step), then the remedy; the opt-out comes last and says what it gives up."""
    opt_out = ("only if that cannot be done, opt into weaker isolation with isolation \"unsafe-no-namespaces\" "
               "(the code can then read your files and see other processes)")
    if "could not isolate the code: step" in reason:
        step = reason.split("could not isolate the code: ", 1)[1]
        return (f"the sandbox could not build its isolated view: {step}. User namespaces work here; this step "
                f"failed on this machine's file layout (please report it with the message); {opt_out}")
    return (f"namespace isolation for model-written code is unavailable here: {reason}. Enable unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0); " + opt_out)


_probe_lock = threading.Lock()
_probe: list[str | None] = []


def isolation_problem() -> str | None:
    """Why namespace isolation does not work on this machine, or None when it does (checked once per process)."""
    with _probe_lock:
        if not _probe:
            try:
                res = run_python("print('isolated')", timeout_s=30)
                _probe.append(None if res.ok and res.stdout == "isolated\n" else
                              f"a test program failed: {res.stderr.strip()[-300:] or res.exit_code}")
            except SandboxUnavailable as err:
                _probe.append(str(err))
        return _probe[0]


def require_isolation(isolation: str, setting: str) -> None:
    """Raise :class:`SandboxUnavailable` naming ``setting`` when ``isolation`` is ``namespaces`` and it does not work."""
    if isolation not in ISOLATION_MODES:
        raise UserError(f"{setting}: expected one of {', '.join(ISOLATION_MODES)}, got {isolation!r}")
    if isolation == "namespaces" and (problem := isolation_problem()) is not None:
        raise SandboxUnavailable(f"{setting} = \"namespaces\": {problem}")
