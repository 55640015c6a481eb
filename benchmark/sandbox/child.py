"""The sandbox's child program: its text runs as ``python -I -B -c <this file> <spec JSON>``.

:mod:`benchmark.sandbox.process` starts it (under ``unshare`` for namespace
isolation) and describes what it guarantees. Importing this module does
nothing; everything happens in :func:`main`, which runs only as a program.

With ``isolate`` the interpreter starts as PID 1 of fresh user, PID,
network, mount, IPC and UTS namespaces and builds the view the code gets
(:func:`isolate`): a tmpfs root holding read-only binds of the system and
Python directories, a few devices, a private ``/proc`` and a private
writable ``/tmp``; then ``pivot_root`` into it, detach the old root, remount
every mount read-only (``/tmp`` and the devices excepted) and drop every
capability. It then forks: the child runs the code, and PID 1 waits and
reports the child's wait status on ``status_fd`` (``S`` once isolated, then
``X<status>``). When PID 1 exits, the kernel kills everything left in the
namespace.

Both modes then set resource limits and install an audit hook (defence in
depth, and the only guard in ``unsafe-no-namespaces`` mode) before the
code runs in a fresh ``__main__``.
"""

import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
ST_RELATIME = 4096
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
ISOLATION_FAILED = 121
"""Exit status of PID 1 when it could not build the isolated view (the code never ran)."""


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _check(ctypes, ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def isolate(spec):
    """Build the sandbox's filesystem view, move into it and drop every capability (PID 1, before the fork)."""
    ctypes, libc = _libc()

    def mount(src, target, fstype, flags, data=None):
        _check(ctypes, libc.mount(src and src.encode(), target.encode(), fstype and fstype.encode(),
                                  ctypes.c_ulong(flags), data and data.encode()), f"mount {target}")

    def bind(src, new, at=None):
        target = new + (at or src)
        if os.path.islink(src):  # merged /usr: /bin -> usr/bin stays a symlink
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.lexists(target):
                os.symlink(os.readlink(src), target)
            return
        if os.path.isdir(src):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
        mount(src, target, None, MS_BIND | MS_REC)

    new = spec["mountpoint"]
    step = "make the mounts private"
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
        step = f"mount the new root (a tmpfs on {new})"
        mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
        # The private /tmp first: an interpreter installed under /tmp is then bound inside it, not over it.
        step = f"mount the private {spec['work']}"
        os.makedirs(new + spec["work"])
        mount("tmpfs", new + spec["work"], "tmpfs", MS_NOSUID | MS_NODEV,
              f"mode=0777,size={spec['tmp_bytes']},nr_inodes=16384")
        for src in spec["ro_binds"]:
            step = f"bind {src} into the view"
            if os.path.lexists(src):
                bind(src, new)
        for path in spec["masks"]:
            step = f"hide the package directory {path}"
            if os.path.isdir(new + path) and not os.path.islink(new + path):
                mount("tmpfs", new + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,nr_inodes=8")
        for src, target in spec["package_binds"]:
            step = f"bind the allowed package {src} at {target}"
            bind(src, new, target)
        for dev in DEVICES:
            step = f"bind {dev}"
            if os.path.exists(dev):
                bind(dev, new)
        step = "link /dev/fd and /dev/std*"
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                             ("stderr", "/proc/self/fd/2")):
            os.symlink(target, f"{new}/dev/{name}")
        step = "mount a private /proc"
        os.makedirs(new + "/proc")
        mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        step = "pivot_root into the view"
        _enter(ctypes, libc, new)
        step = "remount the view read-only"
        _remount_read_only(spec, mount)
        step = "drop every capability"
        _drop_privileges(ctypes, libc)
    except (OSError, KeyError) as err:
        raise IsolationStepFailed(f"step '{step}' failed: {err}") from None


class IsolationStepFailed(Exception):
    """Building the isolated view failed at a named step (the code never ran)."""


def _enter(ctypes, libc, new):
    os.chdir(new)
    pivot = getattr(libc, "pivot_root", None)
    if pivot is not None:
        _check(ctypes, pivot(b".", b"."), "pivot_root")
    else:
        import platform

        _check(ctypes, libc.syscall(SYS_PIVOT_ROOT[platform.machine()], b".", b"."), "pivot_root")
    _check(ctypes, libc.umount2(b".", MNT_DETACH), "detach the old root")  # the host tree is gone from here on
    os.chdir("/")


def _remount_read_only(spec, mount):
    for target in _mount_points():
        if target in ("/", "/proc", spec["work"]) or target in DEVICES:
            continue
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(target))
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _mount_points():
    """Mount points of this mount namespace, from ``/proc/self/mountinfo`` (octal escapes decoded)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        points = [line.split()[4] for line in fh]
    return [p.encode().decode("unicode_escape") if "\\" in p else p for p in points]


def _kept_flags(path):
    # A remount must repeat the locked flags of a mount inherited from the host, or it is refused.
    f = os.statvfs(path).f_flag
    kept = f & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    return kept | (MS_RELATIME if f & ST_RELATIME else 0)


def _drop_privileges(ctypes, libc):
    """No capability in any set, none to regain through exec, no ptrace of this process."""
    _check(ctypes, libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words: all zero
    _check(ctypes, libc.capset(header, data), "capset")
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def reap(child, status_fd):
    """PID 1: reap every process until ``child`` ends, report its wait status, exit (killing the rest)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        if pid == child:
            os.write(status_fd, b"X%d" % status)
            os._exit(0)


def set_limits(mem, cpu, fsize):
    import resource

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


def neuter_fork_exec():
    import _posixsubprocess
    import ctypes  # noqa: F401  imported before the hook (its import dlopens); every later ctypes.* event is refused

    def fork_exec(*a, **k):
        raise PermissionError("sandbox: starting processes is blocked")

    _posixsubprocess.fork_exec = fork_exec


def install_hook(work):
    """The audit hook. Every name it uses is bound here, so patching ``builtins`` cannot change what it does."""
    import builtins
    import posix
    import stat
    from urllib.parse import unquote

    getcwd, fspath, stat_, S_ISDIR = posix.getcwd, posix.fspath, posix.stat, stat.S_ISDIR
    isinstance_, any_, len_ = builtins.isinstance, builtins.any, builtins.len
    PermErr, ImpErr, OSErr, Str, Bytes, Int = PermissionError, ImportError, OSError, str, bytes, int
    WRITE = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    NOPROC = frozenset(("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                        "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill",
                        "os.symlink", "os.link", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                        "sys.setprofile", "sys.settrace"))
    PATH1 = frozenset(("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.chflags",
                       "os.lchflags", "os.truncate", "os.utime", "os.setxattr", "os.removexattr",
                       "shutil.rmtree", "os.chdir", "os.mkfifo", "os.mknod"))
    NOIMPORT = frozenset(("_ctypes", "_posixsubprocess"))
    MEMORY_DB = frozenset(("", ":memory:"))
    ROOT, ALLOW = work, ("/dev/null",)

    def text(p):
        p = fspath(p)
        return p.decode("utf-8", "surrogateescape") if isinstance_(p, Bytes) else p

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
        if isinstance_(p, Int):
            return False
        p = text(p)
        if not p.startswith("/") and ".." in p.split("/"):
            # The audit event does not carry dir_fd, so a relative ".." cannot be resolved safely.
            return False
        r = resolve(p)
        return r == ROOT or r.startswith(ROOT + "/") or r in ALLOW

    def db_inside(name):
        if name in MEMORY_DB:
            return True
        if name.startswith("file:"):  # a URI (uri=True): check the path sqlite will open
            path, _, query = name[5:].partition("?")
            path = unquote(path.partition("#")[0])
            if path.startswith("//"):
                path = "/" + path[2:].partition("/")[2]
            memory = any_(unquote(kv) == "mode=memory" for kv in query.split("&"))
            return path in MEMORY_DB or memory or inside(path)
        return inside(name)

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if isinstance_(path, Int):
                return
            writing = (flags or 0) & WRITE or (isinstance_(mode, Str) and any_(c in mode for c in "wax+"))
            if writing and not inside(path):
                raise PermErr(f"sandbox: writing {path!r} outside the working directory is blocked")
            if mode is None and not writing:
                try:
                    isdir = S_ISDIR(stat_(path).st_mode)
                except OSErr:
                    isdir = False
                if isdir and not inside(path):
                    raise PermErr(f"sandbox: os.open of directory {path!r} is blocked")
        elif event == "import":
            if args[0] in NOIMPORT:
                raise ImpErr(f"sandbox: import of {args[0]!r} is blocked")
        elif event.startswith("socket."):
            if event == "socket.__new__" and len_(args) > 1 and args[1] == 1:  # AF_UNIX: asyncio self-pipe
                return
            raise PermErr(f"sandbox: network access ({event}) is blocked")
        elif event.startswith("ctypes.") or event in NOPROC:
            raise PermErr(f"sandbox: {event} is blocked")
        elif event in PATH1:
            if not inside(args[0]):
                raise PermErr(f"sandbox: {event} on {args[0]!r} outside the working directory is blocked")
        elif event == "os.rename":
            if not (inside(args[0]) and inside(args[1])):
                raise PermErr("sandbox: os.rename outside the working directory is blocked")
        elif event == "sqlite3.connect":
            db = args[0]
            try:
                name = text(db)
            except TypeError:
                name = None
            if not (isinstance_(name, Str) and db_inside(name)):
                raise PermErr(f"sandbox: sqlite3.connect({db!r}) outside the working directory is blocked")

    sys.addaudithook(hook)


def _read_fd(fd):
    chunks = []
    while chunk := os.pread(fd, 1 << 20, sum(len(c) for c in chunks)):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8")


def main():
    import json

    spec = json.loads(sys.argv[1])
    source = _read_fd(spec["code_fd"])
    if spec["isolate"]:
        status_fd = spec["status_fd"]
        try:
            isolate(spec)
        except IsolationStepFailed as err:
            sys.stderr.write(f"sandbox: could not isolate the code: {err}\n")
            os._exit(ISOLATION_FAILED)
        os.write(status_fd, b"S")
        child = os.fork()
        if child:
            reap(child, status_fd)
        os.close(status_fd)
        _ctypes, libc = _libc()
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # SIGKILL if PID 1 goes (the namespace would take us anyway)
    os.chdir(spec["work"])
    set_limits(spec["mem"], spec["cpu"], spec["fsize"])
    code = compile(source, "<sandbox>", "exec")
    neuter_fork_exec()
    install_hook(spec["work"])
    import builtins
    import types

    sys.path.extend(spec["path"])  # python -S: the standard library, then only the allowed packages
    if not hasattr(builtins, "exit"):  # site's exit()/quit(), which -S leaves out
        builtins.exit = builtins.quit = sys.exit
    module = types.ModuleType("__main__")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    sys.argv = ["<sandbox>"]
    return code, module.__dict__


if __name__ == "__main__":
    _code, _ns = main()
    del main, isolate, reap, set_limits, neuter_fork_exec, install_hook
    exec(_code, _ns)
