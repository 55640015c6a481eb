"""Run untrusted (model-written) Python in a subprocess with time, memory and side-effect limits.

The child is a fresh ``python -I -B`` (isolated: no ``PYTHON*`` variables, no
user site, no script dir on ``sys.path``) started in its own session, with a
fresh empty working directory that is deleted afterwards and an environment
that carries none of the parent's variables (so no API keys).  A small
bootstrap sets resource limits and installs an audit hook before the user code
runs.

What is blocked (an attempt raises ``PermissionError``, or ``ImportError`` for
blocked imports, inside the child):

- network: every ``socket.*`` audit event (connect, bind, getaddrinfo, sendto,
  ...) and creating any non-``AF_UNIX`` socket;
- new processes: ``subprocess.Popen``, ``os.system``, ``os.exec*``,
  ``os.posix_spawn*``, ``os.spawn*``, ``os.fork``/``forkpty``, and the raw
  ``_posixsubprocess.fork_exec`` (replaced before user code runs);
- signals to other processes: ``os.kill``, ``os.killpg``, ``signal.pthread_kill``;
- writes outside the working directory: ``open``/``os.open`` with any write
  flag, remove/rename/mkdir/rmdir/chmod/chown/truncate/utime/xattr and
  ``shutil.rmtree`` on paths outside it; ``os.symlink``/``os.link``;
  ``os.open`` of directories outside it and relative write paths containing
  ``..`` (the audit events do not carry ``dir_fd``); ``chdir`` outside it;
- using ``ctypes``: it is imported before the hook (pandas and sympy import it)
  and every later ``ctypes.*`` audit event (dlopen, dlsym, foreign calls,
  ``from_address``, ...) is refused; re-importing ``_ctypes`` or
  ``_posixsubprocess`` is refused;
- ``gc.get_objects``/``get_referrers``/``get_referents`` and
  ``sys.settrace``/``sys.setprofile`` (which could reach or alter the hook's state).

Resource limits: ``RLIMIT_AS`` = ``memory_mb`` (allocations beyond it raise
``MemoryError``), ``RLIMIT_CPU`` = timeout + 1 s, ``RLIMIT_FSIZE`` = 32 MiB per
file (stdout/stderr are files too, so a runaway print loop ends in
``OSError: File too large``), ``RLIMIT_NPROC``
= 0 and ``RLIMIT_CORE`` = 0.  The wall-clock timeout kills the whole process
group with SIGKILL.

NOT blocked / caveats: reading any file the user can read; CPU-heavy loops
until the timeout; threads (unless ``RLIMIT_NPROC`` applies: it does not for
root, and for other users it also forbids new threads).  Audit hooks are not a
security boundary (CPython says so): this stops accidental and naive side
effects of model-written code, not a determined attacker.  For hostile code
use a container or nsjail around the whole runtime.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MAX_OUTPUT_CHARS = 20_000
"""Each of stdout/stderr is cut to about this many characters (head and tail kept, a note between)."""
FILE_SIZE_LIMIT_BYTES = 32 * 1024 * 1024
"""``RLIMIT_FSIZE`` in the child: the largest file (including stdout/stderr) it may write."""

_SIGNAL_NOTES = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGXFSZ: f"file size limit exceeded ({FILE_SIZE_LIMIT_BYTES // 2**20} MiB; output too large?)",
    signal.SIGKILL: "killed",
    signal.SIGSEGV: "segmentation fault",
}


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
    """The wall-clock timeout fired and the process group was killed."""
    duration_ms: float
    """Wall-clock time from spawn to reap, in ms."""
    limit: str | None = None
    """Which limit ended the run, if one did: timeout, memory, cpu, file_size."""


# Runs in the child as ``python -I -B -c _BOOTSTRAP code_path work_dir mem_bytes cpu_s fsize``.
# The hook's state lives in closure cells of immutable values and a private
# globals dict, so user code cannot edit it short of ctypes/gc (both blocked).
_BOOTSTRAP = r'''
import sys, os, resource, posix, builtins, types

def _limits(mem, cpu, fsize):
    for lim, soft, hard in ((resource.RLIMIT_AS, mem, mem), (resource.RLIMIT_CPU, cpu, cpu + 1),
                            (resource.RLIMIT_FSIZE, fsize, fsize), (resource.RLIMIT_NPROC, 0, 0),
                            (resource.RLIMIT_CORE, 0, 0)):
        cur_hard = resource.getrlimit(lim)[1]
        if cur_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        try:
            resource.setrlimit(lim, (soft, hard))
        except (ValueError, OSError):
            pass

def _install(work):
    getcwd, fspath, stat_, S_ISDIR = posix.getcwd, posix.fspath, posix.stat, __import__("stat").S_ISDIR
    PermErr, ImpErr, Str, Bytes, Int = PermissionError, ImportError, str, bytes, int
    WRITE = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    NOPROC = frozenset(("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                        "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill",
                        "os.symlink", "os.link", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                        "sys.setprofile", "sys.settrace"))
    PATH1 = frozenset(("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.chflags",
                       "os.lchflags", "os.truncate", "os.utime", "os.setxattr", "os.removexattr",
                       "shutil.rmtree", "os.chdir", "os.mkfifo", "os.mknod"))
    NOIMPORT = frozenset(("_ctypes", "_posixsubprocess"))
    ROOT, ALLOW = work, ("/dev/null",)

    def text(p):
        p = fspath(p)
        return p.decode("utf-8", "surrogateescape") if isinstance(p, Bytes) else p

    def resolve(p):
        # Lexical resolution with captured C functions: no monkeypatchable os.path code.
        if not p.startswith("/"):
            p = getcwd() + "/" + p
        parts = []
        for seg in p.split("/"):
            if seg == "..":
                if parts:
                    parts.pop()
            elif seg and seg != ".":
                parts.append(seg)
        return "/" + "/".join(parts)

    def inside(p):
        if isinstance(p, Int):
            return False
        p = text(p)
        if not p.startswith("/") and ".." in p.split("/"):
            # The audit event does not carry dir_fd, so a relative ".." cannot be resolved safely.
            return False
        r = resolve(p)
        return r == ROOT or r.startswith(ROOT + "/") or r in ALLOW

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if isinstance(path, Int):
                return
            writing = (flags or 0) & WRITE or (isinstance(mode, Str) and any(c in mode for c in "wax+"))
            if writing and not inside(path):
                raise PermErr(f"sandbox: writing {path!r} outside the working directory is blocked")
            if mode is None and not writing:
                try:
                    isdir = S_ISDIR(stat_(path).st_mode)
                except OSError:
                    isdir = False
                if isdir and not inside(path):
                    raise PermErr(f"sandbox: os.open of directory {path!r} is blocked")
        elif event == "import":
            if args[0] in NOIMPORT:
                raise ImpErr(f"sandbox: import of {args[0]!r} is blocked")
        elif event.startswith("socket."):
            if event == "socket.__new__" and len(args) > 1 and args[1] == 1:  # AF_UNIX: asyncio self-pipe
                return
            raise PermErr(f"sandbox: network access ({event}) is blocked")
        elif event.startswith("ctypes.") or event in NOPROC:
            raise PermErr(f"sandbox: {event} is blocked")
        elif event in PATH1:
            if not inside(args[0]):
                raise PermErr(f"sandbox: {event} on {args[0]!r} outside the working directory is blocked")
        elif event == "os.rename":
            if not (inside(args[0]) and inside(args[1])):
                raise PermErr(f"sandbox: os.rename outside the working directory is blocked")

    sys.addaudithook(hook)

def _neuter_fork_exec():
    import _posixsubprocess
    import ctypes  # imported before the hook (its import dlopens); every later ctypes.* event is refused
    def fork_exec(*a, **k):
        raise PermissionError("sandbox: starting processes is blocked")
    _posixsubprocess.fork_exec = fork_exec

def _main():
    code_path, work, mem, cpu, fsize = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    with open(code_path, encoding="utf-8") as f:
        source = f.read()
    code = compile(source, "<sandbox>", "exec")
    _limits(mem, cpu, fsize)
    _neuter_fork_exec()
    _install(work)
    module = types.ModuleType("__main__")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    sys.argv = ["<sandbox>"]
    return code, module.__dict__

_code, _ns = _main()
del _main, _install, _limits, _neuter_fork_exec
exec(_code, _ns)
'''


def _child_env(work: Path) -> dict[str, str]:
    """A clean environment: nothing inherited, so no secrets reach the child."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work),
        "TMPDIR": str(work),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # BLAS libraries start one thread per core at import; keep numpy cheap under RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


@dataclass(kw_only=True, frozen=True, slots=True)
class _Prepared:
    root: Path
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    stdin_path: Path | None
    out_path: Path
    err_path: Path


def _prepare(code: str, timeout_s: float, memory_mb: int, stdin: str | None) -> _Prepared:
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if memory_mb < 32:
        raise ValueError(f"memory_mb must be >= 32, got {memory_mb}")
    root = Path(tempfile.mkdtemp(prefix="mas-sandbox-")).resolve()
    work, io_dir = root / "work", root / "io"
    work.mkdir()
    io_dir.mkdir()
    code_path = io_dir / "main.py"
    code_path.write_text(code, encoding="utf-8")
    stdin_path = None
    if stdin is not None:
        stdin_path = io_dir / "stdin.txt"
        stdin_path.write_text(stdin, encoding="utf-8")
    cpu_s = int(timeout_s) + 1
    argv = [sys.executable, "-I", "-B", "-c", _BOOTSTRAP, str(code_path), str(work),
            str(memory_mb * 2**20), str(cpu_s), str(FILE_SIZE_LIMIT_BYTES)]
    return _Prepared(root=root, argv=argv, env=_child_env(work), cwd=work, stdin_path=stdin_path,
                     out_path=io_dir / "stdout.txt", err_path=io_dir / "stderr.txt")


def _read_capped(path: Path) -> str:
    """The file's text, or its head and tail around a note when longer than ``MAX_OUTPUT_CHARS``.

    The tail is kept because that is where tracebacks and final results are.
    """
    half = MAX_OUTPUT_CHARS // 2
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(0)
            if size <= MAX_OUTPUT_CHARS * 4:  # a UTF-8 char is at most 4 bytes
                head = tail = f.read().decode("utf-8", errors="replace")
                if len(head) <= MAX_OUTPUT_CHARS:
                    return head
            else:
                head = f.read(half * 4).decode("utf-8", errors="replace")
                f.seek(size - half * 4)
                tail = f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return head[:half] + f"\n[sandbox: output truncated, {size:,} bytes in all]\n" + tail[-half:]


def _finish(prep: _Prepared, exit_code: int | None, timed_out: bool, start: float,
            timeout_s: float, memory_mb: int) -> SandboxResult:
    duration_ms = (time.perf_counter() - start) * 1000.0
    stdout, stderr = _read_capped(prep.out_path), _read_capped(prep.err_path)
    shutil.rmtree(prep.root, ignore_errors=True)
    limit = None
    if timed_out:
        limit = "timeout"
        stderr += f"\n[sandbox: wall-clock timeout after {timeout_s:g} s; process group killed]\n"
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
                         exit_code=exit_code, timed_out=timed_out, duration_ms=duration_ms, limit=limit)


def _kill_group(pid: int) -> None:
    # The child is a session leader (start_new_session), so its pgid is its pid.
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512,
               stdin: str | None = None) -> SandboxResult:
    """Run ``code`` in a sandboxed interpreter; ``timeout_s`` wall clock (s), ``memory_mb`` address space (MB).

    >>> run_python("print(6 * 7)").stdout
    '42\\n'
    """
    prep = _prepare(code, timeout_s, memory_mb, stdin)
    start = time.perf_counter()
    timed_out = False
    try:
        with prep.out_path.open("wb") as out, prep.err_path.open("wb") as err, \
                (prep.stdin_path.open("rb") if prep.stdin_path else open(os.devnull, "rb")) as inp:
            proc = subprocess.Popen(prep.argv, stdin=inp, stdout=out, stderr=err, cwd=prep.cwd,
                                    env=prep.env, start_new_session=True, close_fds=True)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid)
                proc.wait()
            finally:
                if proc.returncode is None:  # interrupted (KeyboardInterrupt): never leak the child
                    _kill_group(proc.pid)
                    proc.wait()
    except BaseException:
        shutil.rmtree(prep.root, ignore_errors=True)
        raise
    return _finish(prep, proc.returncode, timed_out, start, timeout_s, memory_mb)


async def arun_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512,
                      stdin: str | None = None) -> SandboxResult:
    """Async :func:`run_python` on asyncio subprocesses (does not block the event loop while waiting)."""
    prep = _prepare(code, timeout_s, memory_mb, stdin)
    start = time.perf_counter()
    timed_out = False
    proc = None
    try:
        with prep.out_path.open("wb") as out, prep.err_path.open("wb") as err, \
                (prep.stdin_path.open("rb") if prep.stdin_path else open(os.devnull, "rb")) as inp:
            proc = await asyncio.create_subprocess_exec(
                *prep.argv, stdin=inp, stdout=out, stderr=err, cwd=prep.cwd, env=prep.env,
                start_new_session=True, close_fds=True)
            try:
                await asyncio.wait_for(proc.wait(), timeout=timeout_s)
            except asyncio.TimeoutError:
                timed_out = True
                _kill_group(proc.pid)
                await proc.wait()
    except BaseException:
        # Cancelled or failed: kill the child and clean up before propagating.
        if proc is not None and proc.returncode is None:
            _kill_group(proc.pid)
            try:
                await asyncio.shield(proc.wait())
            except BaseException:
                pass
        shutil.rmtree(prep.root, ignore_errors=True)
        raise
    return _finish(prep, proc.returncode, timed_out, start, timeout_s, memory_mb)
