"""Forked worker processes for the passes over an experiment's task directories (summaries, the report).

Reading and validating run files is most of a summary's and a report's time,
and task directories are independent, so large experiments are split into
contiguous chunks that forked workers (one per usable core, at most 4)
handle; the results are joined in their original order, so the output does
not depend on the number of workers. Only a process with a single thread
forks: forking one that holds threads (a sweep's) can deadlock on a lock
another thread held; there, and for small experiments, one process does it
all. Fork rather than the forkserver: that one re-imports the caller's main
module, which breaks scripts without a ``__main__`` guard.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

PARALLEL_MIN_RUNS = 400
"""Below this many runs one process is quicker than starting workers (the report, which knows the runs)."""
PARALLEL_MIN_TASKS = 64
"""The same rule in task directories to re-read (the summaries, which count runs only by reading them)."""

T = TypeVar("T")
R = TypeVar("R")


def fork_safe() -> bool:
    """Whether this process may fork workers (it has a single thread and the platform forks)."""
    return threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()


def usable_workers() -> int:
    """Processes a pass may use: the usable cores (at most 4), or 1 when forking is not safe here."""
    if not fork_safe():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(4, cores))


_PR_SET_PDEATHSIG = 1
"""``prctl`` option (linux/prctl.h): the signal this process gets when the thread that forked it ends."""


def die_with_parent(parent_pid: int) -> None:
    """In a forked helper (a pool worker, the plots' child): be killed when ``parent_pid``, the process that
    forked it, dies, even by ``kill -9``.

    A killed ``summarize-experiment`` left its plot child and pool workers alive for good (~170 MB): each held
    the others' pipes open, so none saw its input end. SIGKILL, not SIGTERM: a fork inherits the parent's
    handlers, and the sweep's SIGTERM handler would keep the helper alive. Elsewhere than Linux this does
    nothing but the check below.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os._exit(1)


def chunks(items: Sequence[T], workers: int) -> list[list[T]]:
    """``items`` in contiguous chunks, four per worker: small chunks even out slow and fast task directories."""
    size = max(1, -(-len(items) // (workers * 4)))
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


_FN: Callable[[Any], Any] | None = None
"""The chunk function of the pass in progress: the forked workers inherit it, so it is never pickled (it may
close over a large context, such as the report's layout)."""


def _run_chunk(part: list[Any]) -> Any:
    assert _FN is not None
    return _FN(part)


def fork_chunks(fn: Callable[[list[T]], R], items: Sequence[T], *, workers: int,
                meanwhile: Callable[[], object] | None = None) -> list[R]:
    """``fn`` over :func:`chunks` of ``items``, one result per chunk in order, in ``workers`` forked processes
    when more than one (else one call over all the items). The chunks and results are pickled, ``fn`` is not.

    ``meanwhile``: the caller's work that needs none of the results (the imports of what comes after the pass),
    done in this process once the workers have forked, so it overlaps their work, or first when none fork.
    """
    global _FN
    if workers <= 1 or len(items) < 2:
        if meanwhile is not None:
            meanwhile()
        return [fn(list(items))]
    _FN = fn  # set before the pool forks its workers (on the first task submitted)
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            results = pool.map(_run_chunk, chunks(items, workers))  # forks every worker (the fork context)
            if meanwhile is not None:
                meanwhile()
            return list(results)
    finally:
        _FN = None


def fork_map(fn: Callable[[T], R], items: Sequence[T], *, workers: int,
             meanwhile: Callable[[], object] | None = None) -> list[R]:
    """``[fn(x) for x in items]``, over :func:`fork_chunks`."""
    return [r for part in fork_chunks(lambda part: [fn(x) for x in part], items, workers=workers,
                                      meanwhile=meanwhile) for r in part]
