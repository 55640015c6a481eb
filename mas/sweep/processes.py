"""The ``local`` executor's worker processes (``--workers N``): a sweep's runs spread over N event loops and cores.

Against a fast endpoint one process cannot keep it busy: a short run's harness (LangGraph, the LangChain call
path, tracing, the run's files) costs milliseconds of CPU per call on one event loop, so past a few hundred calls
a second the calls queue behind that loop, not at the endpoint. With ``workers > 1`` the sweep process keeps
the bookkeeping (manifest, index, progress, resume) and N worker processes of its own run the runs, each on one
event loop, each with 1/N of every route's limits (``per_worker_cfg`` of :mod:`mas.sweep.executors`). A run's files are
the ones the in-process executor writes, written by the worker that runs it, so resume works the same.

Only the standard library: each worker is ``python -c ...`` started by this process with one end of a socket
pair (pickled messages over :class:`multiprocessing.connection.Connection`); the sweep sends runs to the least
busy worker and the worker answers each with its result. Not ``multiprocessing``'s own processes: its ``spawn``
re-runs the caller's main module, which breaks a script without a ``__main__`` guard, and ``fork`` is unsafe in a
process holding threads (the sweep's).

No worker outlives the sweep: a stopped sweep (Ctrl-C, SIGTERM, a full disk) tells each to cancel its runs and
waits for it (their partial files are cleared when the runs are redone); a sweep killed outright closes the
socket, which ends the worker, and on Linux the kernel kills it too (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from descriptor.errors import UserError
from descriptor.records import RunResult
from mas.logging import get_logger
from mas.sweep.spending import WAIT, SpendGate

log = get_logger(__name__)

STOP_WAIT_S = 30.0
"""How long a stopping sweep waits for a worker to cancel its runs and exit before killing it (s)."""


class WorkerError(RuntimeError):
    """What ended a run in a worker process (the exception itself when it could not be sent), or the worker's
    own end."""


@dataclass(kw_only=True, slots=True)
class _Worker:
    index: int
    proc: subprocess.Popen[bytes]
    conn: Connection
    ready: bool = False
    alive: bool = True
    inflight: dict[str, Any] = field(default_factory=dict)
    """run_id -> RunSpec of the runs this worker has and has not answered."""


def _start(index: int, job_state: dict[str, Any]) -> _Worker:
    ours, theirs = socket.socketpair()
    code = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
            "from mas.sweep.processes import worker_main; worker_main(int(sys.argv[2]))")
    path = [os.getcwd() if p == "" else p for p in sys.path]
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(path), str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    theirs.close()
    conn = Connection(ours.detach())
    conn.send(job_state)
    return _Worker(index=index, proc=proc, conn=conn)


def _job_state(job: Any, cfg: Any) -> dict[str, Any]:
    """What a worker needs: its share of the config (``cfg``) and the sweep's settings."""
    from descriptor.redact import registered_secret_env
    from mas.logging import configured_level

    return {"cfg": cfg, "bench_options": job.bench_options, "tracing": job.tracing,
            "plugins": job.plugins, "secret_env": sorted(registered_secret_env()), "log_level": configured_level(),
            "parent": os.getpid()}


async def run_processes(specs: SpendGate, job: Any, on_done: Any, cfg: Any) -> None:
    """Run ``specs`` in ``job.workers`` worker processes, each with the config ``cfg`` (its share of the route
    limits), at most ``job.concurrency`` in flight across them and as the gate allows; ``on_done`` is called here,
    on this event loop, once per run (see :mod:`mas.sweep.executors`)."""
    if not len(specs):
        return
    loop = asyncio.get_running_loop()
    state = _job_state(job, cfg)
    workers = [_start(i, state) for i in range(job.workers)]
    per_worker = -(-job.concurrency // job.workers)
    exhausted = stopping = False
    finished = loop.create_future()

    def in_flight() -> int:
        return sum(len(w.inflight) for w in workers)

    def dispatch() -> None:
        nonlocal exhausted
        while not exhausted and in_flight() < job.concurrency:
            ready = [w for w in workers if w.alive and w.ready and len(w.inflight) < per_worker]
            if not ready:
                break
            spec = specs.take_nowait()
            if spec is WAIT:  # the runs in flight may spend what is left: a finished one dispatches again
                break
            if spec is None:
                exhausted = True
                break
            worker = min(ready, key=lambda w: len(w.inflight))
            worker.inflight[spec.run_id] = spec
            try:
                worker.conn.send(("run", spec))
            except OSError:  # it has just died: its reader reports that, with this run
                break
        alive = [w for w in workers if w.alive]
        if not finished.done() and (not alive or (exhausted and in_flight() == 0)):
            finished.set_result(None)

    def handle(worker: _Worker, msg: tuple[Any, ...]) -> None:
        if finished.cancelled() or (stopping and msg[0] != "done"):
            return  # stopped: the runs still in flight were cancelled, not lost; they are redone next time
        if msg[0] == "ready":
            worker.ready = True
        elif msg[0] == "done":
            _, run_id, data, err = msg
            spec = worker.inflight.pop(run_id)
            if err is None:
                on_done(spec, RunResult.model_validate(data), None)
            else:
                on_done(spec, None, err)
        elif msg[0] == "exit":
            worker.alive = False
            code = worker.proc.poll()
            lost = list(worker.inflight.values())
            worker.inflight.clear()
            if lost or not finished.done():
                log.error("a worker process ended", worker=worker.index, pid=worker.proc.pid, exit_code=code,
                          runs_lost=len(lost))
            for spec in lost:
                on_done(spec, None, WorkerError(f"worker process {worker.proc.pid} ended (exit code {code}) "
                                                "with the run in flight"))
        if not stopping:
            dispatch()

    def read(worker: _Worker) -> None:
        try:
            while True:
                msg = worker.conn.recv()
                loop.call_soon_threadsafe(handle, worker, msg)
        except (EOFError, OSError, RuntimeError):  # the worker ended (or the loop did: nothing to tell)
            try:
                loop.call_soon_threadsafe(handle, worker, ("exit",))
            except RuntimeError:
                pass

    readers = [threading.Thread(target=read, args=(w,), name=f"mas-worker-{w.index}", daemon=True) for w in workers]
    for t in readers:
        t.start()
    try:
        await finished
    finally:
        stopping = True
        await asyncio.shield(_stop(workers))
    if not any(w.alive for w in workers) and not exhausted:
        # Every worker ended before the runs did (they could not start: an import error, no memory): the
        # runs left are not started; their reason is in the workers' output above.
        raise UserError(f"all {len(workers)} worker processes (--workers) ended before the sweep's runs did (exit "
                        f"codes {', '.join(str(w.proc.poll()) for w in workers)}; see their output above); the "
                        "runs not started are run by the same command once the cause is fixed")


async def _stop(workers: list[_Worker]) -> None:
    """Tell every worker to cancel what it still runs and exit; wait for each (killed after :data:`STOP_WAIT_S`)."""
    for w in workers:
        try:
            w.conn.send(("stop",))
        except OSError:
            pass

    def wait(w: _Worker) -> None:
        try:
            w.proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            log.warning("a worker process did not stop in time; killing it", pid=w.proc.pid)
            w.proc.kill()
            w.proc.wait()
        w.conn.close()

    await asyncio.gather(*(asyncio.to_thread(wait, w) for w in workers))


# ---- the worker process -----------------------------------------------------------------------------------------

def worker_main(fd: int) -> None:
    """A worker process: read its job, then run the runs it is sent until told to stop or the sweep is gone; a
    crash prints its traceback redacted (an error's message may quote a key) and exits 1."""
    try:
        _work(Connection(fd))
    except Exception:
        from mas.logging import redacted_traceback

        sys.stderr.write(redacted_traceback())
        sys.exit(1)


def _work(conn: Connection) -> None:
    state = conn.recv()
    from descriptor.parallel import die_with_parent

    die_with_parent(state["parent"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the sweep stops us in order
    from mas.logging import configure_logging

    configure_logging(state["log_level"])
    from descriptor.redact import register_secret_env
    from descriptor.registry import load_plugins
    from mas.config import register_route_secrets

    register_secret_env(state["secret_env"])
    register_route_secrets(state["cfg"])
    load_plugins(state["plugins"])
    try:
        asyncio.run(_serve(conn, state))
    finally:
        if "mas.otel.sidecar" in sys.modules:  # spans were exported: deliver the last runs' before exiting
            from mas.otel.sidecar import flush_all

            flush_all()
        conn.close()


def _sendable(err: BaseException) -> BaseException:
    """``err`` if it survives pickling (an ``OSError`` keeps its errno: a full disk stops the sweep), else a
    :class:`WorkerError` with its type and message."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - any exception that does not round-trip
        return WorkerError(f"{type(err).__name__}: {err}")


async def _serve(conn: Connection, state: dict[str, Any]) -> None:
    from benchmark.registry import get_benchmark
    from mas.sweep.runner import execute_run

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
    benches: dict[str, Any] = {}
    cfg, tracing = state["cfg"], state["tracing"]

    def read() -> None:
        try:
            while True:
                msg = conn.recv()
                loop.call_soon_threadsafe(inbox.put_nowait, msg)
                if msg[0] == "stop":
                    return
        except (EOFError, OSError):  # the sweep is gone: stop as if told to
            loop.call_soon_threadsafe(inbox.put_nowait, ("stop",))

    def send(msg: tuple[Any, ...]) -> None:
        try:
            conn.send(msg)
        except OSError:  # the sweep is gone; the reader stops us
            pass

    async def one(spec: Any) -> None:
        try:
            if spec.benchmark not in benches:
                benches[spec.benchmark] = get_benchmark(spec.benchmark, state["bench_options"].get(spec.benchmark))
            result = await execute_run(spec, cfg, benches[spec.benchmark], tracing=tracing)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a broken run must not stop the others
            send(("done", spec.run_id, None, _sendable(err)))
        else:
            send(("done", spec.run_id, result.model_dump(mode="json"), None))

    threading.Thread(target=read, name="mas-sweep-inbox", daemon=True).start()
    send(("ready",))
    tasks: set[asyncio.Task[None]] = set()
    while (msg := await inbox.get())[0] != "stop":
        task = asyncio.create_task(one(msg[1]))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in tasks:  # stopped with runs in flight: their partial files are cleared when they are redone
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
