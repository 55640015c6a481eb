"""A run's watchdog over the embedded server it uses: the server stops when the run dies without releasing it.

A process using a run-started llama-server releases it when it exits (:func:`mas.serving.server._release_all`,
an ``atexit`` handler): the server stops with its last user. A run killed with SIGKILL, or by a signal whose
default action ends it (SIGHUP: a closed terminal), runs no handler, and the server was orphaned (~850 MB and a
share of the CPU, until another run adopted it or ``model stop``). So each user process starts this small process
beside it, with a pipe on its stdin that nothing writes: when the user exits, however it exits, the pipe closes,
and the watchdog does what the user's release would have done (:func:`release_for`). After a clean release
there is nothing left to do, and it exits at once.

    python -m mas.serving.watchdog CACHE_ROOT USER_PID
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from mas.serving.catalogue import CachePaths
from mas.serving.process import clear_record, live_users, locked, pid_alive, read_record, terminate, unregister_user


def release_for(paths: CachePaths, user: int) -> bool:
    """Drop ``user``'s mark; stop the recorded server when it is not persistent and no live process uses it.
    True when it stopped one."""
    with locked(paths):
        unregister_user(paths, user)
        rec = read_record(paths)
        if rec is None or rec.persistent or live_users(paths) or not pid_alive(rec.pid):
            return False
        terminate(rec.pid)
        clear_record(paths, rec.pid)
        return True


def start_watchdog(paths: CachePaths, user: int) -> subprocess.Popen[bytes]:
    """The watchdog of ``user`` over the server under ``paths``; it acts when this process's end of the pipe
    closes. Its own session: a Ctrl-C in the terminal reaches the run, not it."""
    return subprocess.Popen([sys.executable, "-m", "mas.serving.watchdog", str(paths.root), str(user)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    root, user = argv
    sys.stdin.buffer.read()  # returns at end of file: the user process has exited, one way or another
    release_for(CachePaths(root=Path(root)), int(user))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
