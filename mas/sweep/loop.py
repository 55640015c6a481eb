"""A resumable sweep: skip finished runs, execute the rest, keep the manifest and progress current.

Resume: a run whose ``result.json`` exists is finished and its files are
never touched again; every other run is executed (``execute_run`` clears an
interrupted run's leftovers and redoes it from scratch). A run whose result
is an infrastructure error (``status: error``) is not a task result: the
next invocations clear and redo it, up to ``retry_errors`` retries in all
(attempts are counted in the manifest).

Clean stop: SIGINT (Ctrl-C) or SIGTERM stops scheduling, cancels the runs
in flight (their partial files are cleared and redone on the next
invocation), leaves finished runs intact, records the stop in the manifest
and raises :class:`SweepInterrupted` (the CLI exits 128 + signal number).

A full disk stops the sweep the same way (every later run would fail too):
the first run or bookkeeping write that finds no space cancels the runs in
flight and the sweep raises a :class:`UserError` saying how many runs
finished; the same command resumes once there is space.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from descriptor.errors import UserError, disk_full, disk_full_message
from descriptor.records import RunResult
from descriptor.run_index import append_entries, entry, read_index
from mas.llm.meter import METER
from mas.logging import get_logger
from mas.sweep.defaults import DEFAULT_RETRY_ERRORS
from mas.sweep.executors import EXECUTORS, SweepJob
from mas.sweep.manifest import ManifestStore
from mas.sweep.progress import ProgressMode, SweepStats, make_progress
from mas.sweep.runner import RunSpec, clear_partial, finished_result

log = get_logger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SweepInterrupted(Exception):
    """The sweep was stopped by a signal; finished runs are kept, the rest resume next time."""

    def __init__(self, signum: int, *, done: int, total: int, root: Path) -> None:
        self.signum = signum
        self.done, self.total, self.root = done, total, root
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name}: {done}/{total} runs finished under {root}; run the same command "
                         "with the same experiment id to finish the rest (finished runs are not redone)")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass(kw_only=True, slots=True)
class SweepOutcome:
    """What a sweep that ran to the end produced."""

    results: list[RunResult]
    """Results of every run that finished, in plan order."""
    skipped: int
    """Runs already finished before this invocation (files untouched)."""
    ran: int
    crashed: dict[str, str] = field(default_factory=dict)
    """run_id -> error, for runs whose ``execute_run`` raised (nothing recorded; redone next time)."""
    over_budget: bool = False
    """The sweep stopped scheduling at ``limits.sweep_cost_usd``: some runs were not started (a later invocation
    with a higher limit runs them)."""


class SpendGate:
    """The runs still to start, handed out until the sweep has spent ``limit`` (USD): the runs in flight then
    finish, no new one starts. ``spent`` counts every finished run of the sweep, earlier invocations' included,
    so a resume with the same limit starts nothing and one with a higher limit goes on."""

    def __init__(self, specs: list[RunSpec], limit: float | None, spent: float) -> None:
        self.specs, self.limit, self.spent = specs, limit, spent
        self.stopped = False

    def __len__(self) -> int:
        return len(self.specs)

    def __iter__(self) -> Iterator[RunSpec]:
        for spec in self.specs:
            if self.limit is not None and self.spent >= self.limit:
                self.stopped = True
                return
            yield spec


class _ThrottledSave:
    """Rewrite the manifest as runs finish, at most once per ``interval_s`` (a large sweep is not O(n^2) I/O).

    A write that finds the disk full goes to ``on_full`` (the manifest is a summary of the run files: resume
    rebuilds what it missed)."""

    def __init__(self, store: ManifestStore, interval_s: float, on_full: Callable[[BaseException], bool]) -> None:
        self.store, self.interval_s, self.on_full = store, interval_s, on_full
        self.last = 0.0
        self.handle: asyncio.TimerHandle | None = None

    def request(self) -> None:
        wait = self.interval_s - (time.monotonic() - self.last)
        if wait <= 0:
            self.now()
        elif self.handle is None:
            self.handle = asyncio.get_running_loop().call_later(wait, self.now)

    def now(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        try:
            self.store.save()
        except OSError as err:
            if not self.on_full(err):
                raise
        self.last = time.monotonic()


@contextlib.contextmanager
def _stop_on_signals(task: asyncio.Task[Any], received: list[int]) -> Iterator[None]:
    """Cancel ``task`` on SIGINT/SIGTERM while inside (only possible on the main thread's loop)."""
    loop = asyncio.get_running_loop()
    installed = []

    def stop(signum: int) -> None:
        if not received:
            log.warning("stopping sweep: cancelling runs in flight", signal=signal.Signals(signum).name)
        received.append(signum)
        task.cancel()

    for sig in STOP_SIGNALS:
        try:
            previous = signal.getsignal(sig)
            loop.add_signal_handler(sig, stop, sig)
            installed.append((sig, previous))
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no signals here
            pass
    try:
        yield
    finally:
        for sig, previous in installed:
            loop.remove_signal_handler(sig)
            # asyncio leaves the default action behind, which ends the process without its exit handlers: a
            # SIGTERM during the summaries or the rollbacks after the sweep stopped it with no word and left the
            # embedded server running. What was there before comes back (the server's SIGTERM-as-exit).
            if previous is not None:
                signal.signal(sig, previous)


def _split_finished(root: Path, specs: list[RunSpec], store: ManifestStore, stats: SweepStats,
                    results: dict[str, RunResult], retry_errors: int) -> list[RunSpec]:
    """Record runs finished earlier; return those still to run.

    The index (``runs.jsonl``) answers for most runs with one read; a run it
    does not list (or lists for a ``result.json`` that is gone) is checked in
    its directory, and a finished one found there is added back to the index.
    A run whose result is an infrastructure error is no task result: it is
    cleared and run again, as long as it has been retried fewer than
    ``retry_errors`` times (attempts counted in the manifest).
    """
    index = read_index(root)
    todo, repaired = [], []
    for spec in specs:
        line = index.get(spec.run_id)
        if line is not None and line.matches(spec.paths.result) and not spec.key.mismatch(line.result):
            result: RunResult | None = line.result
        else:
            result = finished_result(spec)
            if result is not None:
                repaired.append(entry(result, spec.paths.result))
        if result is not None:
            store.mark_finished(spec, result, seen_now=False)
            if result.status != "error" or store.attempts(spec) > retry_errors:
                results[spec.run_id] = result
                stats.add(result, skipped=True)
                continue
            store.note_errored_spend(spec, result)  # spent all the same: the budget keeps counting it
            clear_partial(spec)
            store.mark_pending(spec, retry=True)
        else:
            store.mark_pending(spec)
        todo.append(spec)
    append_entries(root, repaired)
    return todo


async def run_sweep(specs: list[RunSpec], job: SweepJob, *, root: Path, experiment_id: str, executor: str = "local",
                    request: dict[str, Any] | None = None, progress: ProgressMode = "auto",
                    progress_interval_s: float = 10.0, manifest_interval_s: float = 1.0,
                    retry_errors: int = DEFAULT_RETRY_ERRORS, spent_before: float = 0.0) -> SweepOutcome:
    """Execute the unfinished runs of ``specs`` with ``executor``; see the module docstring. ``spent_before``: what
    the experiment's runs outside ``specs`` spent (USD), counted against ``limits.sweep_cost_usd`` (a sweep run in
    phases, as the compute-matched SAS's is)."""
    root.mkdir(parents=True, exist_ok=True)
    store = ManifestStore.open(root, experiment_id, job.cfg)
    store.begin(specs, executor=executor, concurrency=job.concurrency, request=request or {})
    stats = SweepStats(total=len(specs), runs=frozenset(s.run_id for s in specs),
                       groups={s.run_id: (s.benchmark, s.system) for s in specs})
    results: dict[str, RunResult] = {}
    try:
        todo = _split_finished(root, specs, store, stats, results, retry_errors)
        store.manifest.invocations[-1].skipped = stats.skipped
        store.save()
    except OSError as err:
        if (full := disk_full(err)) is None:
            raise
        raise UserError(f"{disk_full_message(full)}: no run started under {root}; free some space and run the "
                        "same command again") from None
    full: list[OSError] = []
    work: asyncio.Task[None] | None = None

    def stop_if_full(err: BaseException) -> bool:
        """Stop the sweep when ``err`` is a full disk (every later run would fail too); whether it was."""
        if (no_space := disk_full(err)) is None:
            return False
        if not full and work is not None:
            log.error("disk full: stopping the sweep; runs in flight are redone on the next invocation",
                      error=disk_full_message(no_space))
            work.cancel()
        full.append(no_space)
        return True

    saver = _ThrottledSave(store, manifest_interval_s, stop_if_full)
    gate = SpendGate(todo, job.cfg.limits.sweep_cost_usd,
                     spent=spent_before + store.spent_on_errors(specs)
                     + sum(r.spent_usd for r in results.values()))
    view = make_progress(progress, interval_s=progress_interval_s)
    crashed: dict[str, str] = {}

    def on_done(spec: RunSpec, result: RunResult | None, err: BaseException | None) -> None:
        calls = METER.close_run(spec.run_id)  # its calls' tokens now come from its result (or it is redone)
        if result is None:
            crashed[spec.run_id] = f"{type(err).__name__}: {err}"
            log.error("run crashed; it will be redone on the next invocation", run=spec.run_id, error=crashed[spec.run_id])
            stop_if_full(err)  # type: ignore[arg-type]
        else:
            results[spec.run_id] = result
            gate.spent += result.spent_usd
            store.mark_finished(spec, result, seen_now=True)
            stats.add(result, calls=calls)
            try:
                append_entries(root, [entry(result, spec.paths.result)])
            except OSError as index_err:  # the index is a cache: the next sweep adds the run back
                if not stop_if_full(index_err):
                    raise
        view.update(stats)
        saver.request()

    received: list[int] = []
    view.start(stats)
    ticker = asyncio.create_task(view.tick(stats))
    work = asyncio.create_task(EXECUTORS[executor](gate, job, on_done))
    status = "crashed"
    try:
        with _stop_on_signals(work, received):
            try:
                await work
            except asyncio.CancelledError:
                if not received and not full:
                    raise  # cancelled from outside: not ours to swallow
        status = ("interrupted" if received else "crashed" if crashed or full else "over_budget" if gate.stopped
                  else "finished")
    finally:
        ticker.cancel()
        view.close(stats)
        store.end(status, signal.Signals(received[0]).name if received else
                  "limits.sweep_cost_usd" if status == "over_budget" else None)
        saver.now()
    if received:
        raise SweepInterrupted(received[0], done=stats.done, total=stats.total, root=root)
    if full:
        raise UserError(f"{disk_full_message(full[0])}: {stats.done}/{stats.total} runs finished under {root}; "
                        "free some space and run the same command again to finish the rest (finished runs are "
                        "not redone)")
    return SweepOutcome(results=[results[s.run_id] for s in specs if s.run_id in results],
                        skipped=stats.skipped, ran=stats.done - stats.skipped, crashed=crashed, over_budget=gate.stopped)
