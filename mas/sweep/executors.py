"""Where the runs of a sweep execute: this process (asyncio) or a Dask cluster.

Both executors take the same :class:`SweepJob` and call ``on_done`` once per
run, in completion order, on the sweep's event loop. Cancelling the
coroutine stops scheduling and cancels the runs in flight; their partial
files stay behind and are cleared when the run is redone (see
:func:`mas.sweep.runner.execute_run`).

``local`` runs ``execute_run`` coroutines on the sweep's own event loop,
at most ``concurrency`` at once; with ``--workers N`` (N > 1, or ``auto``) in N
worker processes of this machine instead (:mod:`mas.sweep.processes`: the
standard library only), each with 1/N of every route's limits. ``dask`` fans whole runs out to
``dask.distributed`` workers (chosen over Ray: pure Python, a light
install, an in-process ``LocalCluster`` for CI, and a plain
``tcp://host:8786`` scheduler for a real cluster). A worker runs each run
on one event loop per worker process, so route limits (``max_concurrent``)
are shared by the runs of that process, and writes the run's directory
itself: the output root must be on a filesystem every worker and the
client see at the same path (NFS, a shared volume).

On one machine, ``--workers N`` starts a LocalCluster of N worker
*processes* instead of the default single in-process worker: a sweep's own
CPU (LangGraph, checkpoints, traces; ~30-50 ms per short run) then spreads
over N event loops and N cores instead of queueing on one. Each worker
process gets 1/N of every route's ``max_concurrent`` and
``requests_per_minute`` (:func:`per_worker_cfg`), so the endpoint's limits
hold for the sweep as a whole.

Pointing it at a cluster::

    dask scheduler                                   # on host A, listens on :8786
    dask worker tcp://A:8786 --nthreads 16           # on each worker host, in the project checkout
    python main.py run ... --executor dask --scheduler-address tcp://A:8786 --concurrency 64
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmark.base import Benchmark
from descriptor.errors import UserError
from descriptor.records import RunResult
from descriptor.registry import load_plugins
from mas.config import ExperimentConfig
from mas.logging import get_logger
from mas.sweep.runner import RunSpec, execute_run
from mas.sweep.spending import SpendGate

log = get_logger(__name__)

ExecutorName = Literal["local", "dask"]
OnDone = Callable[[RunSpec, RunResult | None, BaseException | None], None]
"""Called once per run with its result, or with the exception that escaped ``execute_run``."""


@dataclass(kw_only=True, slots=True)
class SweepJob:
    """Everything an executor needs besides the run list."""

    cfg: ExperimentConfig
    benches: dict[str, Benchmark]
    concurrency: int
    """Runs in flight at once (across all workers for ``dask``)."""
    tracing: bool = True
    scheduler_address: str | None = None
    """``dask`` only: ``tcp://host:8786``; None starts an in-process LocalCluster."""
    dask_client: Any = None
    """``dask`` only: a client already connected to ``scheduler_address`` (the sweep checked the address
    with it before starting); used as is and closed by whoever opened it."""
    bench_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Adapter options by benchmark name, so a remote worker can rebuild the adapter."""
    workers: int = 1
    """Worker processes on this machine, each with 1/N of every route limit: ``local``: 1 = the sweep's own event
    loop, N > 1 = N worker processes (:mod:`mas.sweep.processes`); ``dask`` without ``scheduler_address``:
    1 = one in-process worker (threads), N > 1 = a LocalCluster of N worker processes."""
    plugins: list[str] = field(default_factory=list)
    """Plugin modules this process imported (``--plugin``, config ``plugins``): a worker process imports them
    before its first run, so their benchmarks and systems exist there too (installed packages' entry points
    are found there on their own)."""


async def run_local(specs: SpendGate, job: SweepJob, on_done: OnDone) -> None:
    """Run ``specs`` on this event loop with ``job.concurrency`` workers taking runs from one gate (a worker waits
    there while the runs in flight may spend what is left of the sweep's limit), or in ``job.workers`` worker
    processes when more than one."""
    if job.workers > 1:
        from mas.sweep.processes import run_processes

        await run_processes(specs, job, on_done, per_worker_cfg(job.cfg, job.workers))
        return

    async def worker() -> None:
        while (spec := await specs.take()) is not None:  # the gate is shared: each worker takes the next run
            try:
                result = await execute_run(spec, job.cfg, job.benches[spec.benchmark], tracing=job.tracing)
            except Exception as err:  # a broken run must not stop the sweep
                on_done(spec, None, err)
            else:
                on_done(spec, result, None)

    n = min(job.concurrency, len(specs))
    tasks = [asyncio.create_task(worker()) for _ in range(n)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ---- dask ---------------------------------------------------------------------------------
# Worker-side state: one event loop thread per worker process, and the runs in flight on it.
_worker_loop: asyncio.AbstractEventLoop | None = None
_worker_lock = threading.Lock()
_inflight: dict[str, concurrent.futures.Future[RunResult]] = {}
_bench_cache: dict[tuple[str, str], Benchmark] = {}


def _loop_for_worker() -> asyncio.AbstractEventLoop:
    global _worker_loop
    with _worker_lock:
        if _worker_loop is None or _worker_loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mas-run-loop", daemon=True).start()
            _worker_loop = loop
        return _worker_loop


def _bench_on_worker(name: str, options: dict[str, Any] | None) -> Benchmark:
    from benchmark.registry import get_benchmark

    key = (name, repr(sorted((options or {}).items())))
    with _worker_lock:
        if key not in _bench_cache:
            _bench_cache[key] = get_benchmark(name, options)
        return _bench_cache[key]


def execute_on_worker(spec: RunSpec, cfg: ExperimentConfig, bench_options: dict[str, Any] | None,
                      tracing: bool, plugins: list[str] | None = None) -> dict[str, Any]:
    """A Dask task: run one whole run on the worker's event loop; returns the RunResult as JSON data.

    ``plugins``: the client's plugin modules, imported first (once per worker process)."""
    load_plugins(plugins or [])
    bench = _bench_on_worker(spec.benchmark, bench_options)
    fut = asyncio.run_coroutine_threadsafe(execute_run(spec, cfg, bench, tracing=tracing), _loop_for_worker())
    _inflight[spec.run_id] = fut
    try:
        return fut.result().model_dump(mode="json")
    finally:
        _inflight.pop(spec.run_id, None)


def cancel_on_worker() -> int:
    """Cancel every run in flight on this worker process (called through ``Client.run``)."""
    futs = list(_inflight.values())
    for fut in futs:
        fut.cancel()  # cancels the asyncio task on the worker loop, like the local executor does
    return len(futs)


SCHEDULER_CONNECT_TIMEOUT_S = 20.0
"""How long to try reaching ``--scheduler-address`` before giving up (dask retries until then)."""


async def connect_scheduler(address: str, timeout_s: float | None = None) -> Any:
    """An asynchronous ``distributed.Client`` on ``address``; :class:`UserError` when it cannot be reached.

    Dask raises a bare ``OSError`` (timeout, refused, unknown host) or
    ``ValueError`` (bad scheme) from deep inside its comm layer; the person
    running the sweep needs the address and what to check instead.
    """
    from distributed import Client

    timeout = SCHEDULER_CONNECT_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        return await Client(address, asynchronous=True, timeout=timeout)
    except (OSError, ValueError) as err:
        raise UserError(f"--scheduler-address: could not connect to the dask scheduler at {address!r} "
                        f"within {timeout:g} s ({type(err).__name__}: {err}); check that `dask scheduler` "
                        "is running there and reachable, or leave the address out for an in-process "
                        "LocalCluster") from err


def per_worker_cfg(cfg: ExperimentConfig, workers: int) -> ExperimentConfig:
    """``cfg`` with every route's rate limits divided among ``workers`` processes.

    Limiters live in one process (:mod:`mas.llm.limits`), so N processes with the
    full limit each would send N times what the endpoint allows. Concurrency
    is floored (a process needs at least one slot: :func:`mas.sweep.experiment.validate_request`
    refuses more workers than a route's ``max_concurrent``).
    """
    if workers <= 1:
        return cfg
    routes = {}
    for name, route in cfg.models.items():
        lim = route.rate_limit
        routes[name] = route.model_copy(update={"rate_limit": lim.model_copy(update={
            "max_concurrent": None if lim.max_concurrent is None else max(1, lim.max_concurrent // workers),
            "requests_per_minute": None if lim.requests_per_minute is None else lim.requests_per_minute / workers,
        })})
    return cfg.model_copy(update={"models": routes})


def local_cluster(workers: int, concurrency: int, *, asynchronous: bool = False) -> Any:
    """A Dask LocalCluster on this machine with a worker thread for each of ``concurrency`` runs at once.

    ``workers=1``: one in-process worker (threads); it starts in about a
    second and pickles nothing across processes (CI, small sweeps).
    ``workers=N``: N worker processes, one event loop and core each, each
    taking its share of the runs. Give those workers :func:`per_worker_cfg`.
    """
    from distributed import LocalCluster

    if workers > 1:
        return LocalCluster(n_workers=workers, threads_per_worker=-(-concurrency // workers), processes=True,
                            asynchronous=asynchronous, dashboard_address=None)
    return LocalCluster(n_workers=1, threads_per_worker=concurrency, processes=False, asynchronous=asynchronous,
                        dashboard_address=None)


async def _dask_client(job: SweepJob) -> tuple[Any, Any]:
    """(client, in-process cluster or None); a client passed in ``job`` is returned as is."""
    from distributed import Client

    if job.dask_client is not None:
        return job.dask_client, None
    if job.scheduler_address:
        return await connect_scheduler(job.scheduler_address), None
    cluster = await local_cluster(job.workers, job.concurrency, asynchronous=True)
    client = await Client(cluster, asynchronous=True)
    return client, cluster


async def run_dask(specs: SpendGate, job: SweepJob, on_done: OnDone) -> None:
    """Submit ``specs`` to Dask, at most ``job.concurrency`` in flight (and as the gate allows), and collect results
    as they finish."""
    from distributed import as_completed

    client, cluster = await _dask_client(job)
    cfg = per_worker_cfg(job.cfg, job.workers) if cluster is not None else job.cfg
    futures: dict[Any, RunSpec] = {}

    def submit_more() -> list[Any]:
        """Submit runs while a slot is free and the gate hands one out (with none in flight it always decides)."""
        submitted = []
        while len(futures) < job.concurrency and isinstance(spec := specs.take_nowait(), RunSpec):
            fut = client.submit(execute_on_worker, spec, cfg, job.bench_options.get(spec.benchmark), job.tracing,
                                job.plugins, key=f"run-{spec.run_id}", pure=False)
            futures[fut] = spec
            submitted.append(fut)
        return submitted

    try:
        done_iter = as_completed(submit_more(), with_results=False)
        async for fut in done_iter:
            spec = futures.pop(fut)
            try:
                data = await fut
            except Exception as err:
                on_done(spec, None, err)
            else:
                on_done(spec, RunResult.model_validate(data), None)
            done_iter.update(submit_more())
    except asyncio.CancelledError:
        await _cancel_dask(client, list(futures))
        raise
    finally:
        if client is not job.dask_client:
            await client.close()
        if cluster is not None:
            await cluster.close()


async def _cancel_dask(client: Any, futures: list[Any]) -> None:
    """Drop queued runs and cancel the ones running on workers (best effort, bounded in time)."""
    try:
        await asyncio.wait_for(asyncio.shield(_cancel_dask_now(client, futures)), timeout=30)
    except (TimeoutError, OSError) as err:
        log.warning("could not cancel every dask run; unfinished runs are redone on the next invocation",
                    error=str(err))


async def _cancel_dask_now(client: Any, futures: list[Any]) -> None:
    await client.cancel(futures, force=True)
    cancelled = await client.run(cancel_on_worker)
    log.info("cancelled dask runs in flight", per_worker=cancelled)


EXECUTORS: dict[str, Callable[[SpendGate, SweepJob, OnDone], Any]] = {"local": run_local, "dask": run_dask}
