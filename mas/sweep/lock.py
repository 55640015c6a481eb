"""One sweep per experiment id: an exclusive ``flock`` on ``<experiment_root>/.sweep.lock``.

Two sweeps writing one experiment directory would run every run twice (double
cost) and overwrite each other's files. The lock is held for the whole sweep
by the process that schedules the runs (for ``--executor dask``, the client);
the kernel releases it when that process ends in any way, ``kill -9``
included, so a stale lock never blocks a resume. The file holds the holder's
pid and host, only to name it in the refusal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
from collections.abc import Iterator
from pathlib import Path

from descriptor.errors import UserError

LOCK_NAME = ".sweep.lock"


@contextlib.contextmanager
def sweep_lock(root: Path, experiment_id: str) -> Iterator[Path]:
    """Hold the experiment's lock for the enclosed code; :class:`UserError` naming the holder when it is taken."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            who = f"pid {holder[0]} on {holder[1]}" if len(holder) >= 2 else "another process"
            raise UserError(f"experiment {experiment_id!r} is being run by another sweep ({who}; lock {path}); "
                            "wait for it to finish or stop it, then run the same command again to resume") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {platform.node()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
