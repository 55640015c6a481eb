"""Live counts of this process's model calls, so a sweep's progress moves before its first run finishes.

A debate run on the embedded model takes minutes, so a progress line fed only by finished runs showed
``done 0, tokens 0`` for the first ten minutes of the README's main job and looked hung. Every call
(:func:`mas.llm.call.call_llm`) reports here when it starts and when it ends, under its run's id; the
sweep shows the tokens of runs still in flight beside those of finished runs, how many calls are at the
model and how long the oldest has waited.

Per run, not in one total: when a run finishes the sweep adds its ``tokens_total`` and closes the run
here (:meth:`CallMeter.close_run`), so the live figure never counts a call twice and the last line equals
the sum of the runs' records. Only calls made in this process are seen (``dask`` worker *processes* are
not): the sweep then shows finished runs only, as before.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True, slots=True)
class MeterReading:
    """What the meter holds at one moment."""

    calls_done: int
    """Calls finished since the process started (cache hits and failed calls included)."""
    in_flight: int
    """Calls started and not finished: at the model, waiting for a server slot or for a retry."""
    oldest_s: float | None
    """Seconds the oldest call in flight has been waiting (s); None when none is."""
    open_tokens: int
    """Tokens (input + output) of finished calls of runs not yet closed (tokens)."""
    open_calls: int = 0
    """Finished calls of runs not yet closed."""


class CallMeter:
    """Thread-safe counters (an in-process dask worker calls from its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tickets = itertools.count()
        self._started: dict[int, float] = {}
        self._open: dict[str, int] = {}
        self._calls: dict[str, int] = {}
        self._done = 0

    def call_started(self) -> int:
        """Count a call as in flight; returns the ticket to pass to :meth:`call_finished`."""
        ticket = next(self._tickets)
        with self._lock:
            self._started[ticket] = time.monotonic()
        return ticket

    def call_finished(self, ticket: int, run_id: str, tokens: int) -> None:
        """The call ``ticket`` of run ``run_id`` ended having used ``tokens`` (0 when it failed)."""
        with self._lock:
            self._started.pop(ticket, None)
            self._done += 1
            self._calls[run_id] = self._calls.get(run_id, 0) + 1
            if tokens:
                self._open[run_id] = self._open.get(run_id, 0) + tokens

    def close_run(self, run_id: str) -> int:
        """Run ``run_id`` ended (its record now carries its tokens, or it crashed and will be redone); returns the
        calls it finished (the sweep's ETA counts calls per run)."""
        with self._lock:
            self._open.pop(run_id, None)
            return self._calls.pop(run_id, 0)

    def reading(self, runs: Collection[str] | None = None) -> MeterReading:
        """The counts now; ``open_tokens`` and ``open_calls`` only of ``runs`` when given (a sweep's own runs, not
        a rollback's)."""
        with self._lock:
            oldest = min(self._started.values(), default=None)
            tokens = self._open.values() if runs is None else (n for r, n in self._open.items() if r in runs)
            calls = self._calls.values() if runs is None else (n for r, n in self._calls.items() if r in runs)
            return MeterReading(calls_done=self._done, in_flight=len(self._started),
                                oldest_s=None if oldest is None else time.monotonic() - oldest,
                                open_tokens=sum(tokens), open_calls=sum(calls))


METER = CallMeter()
"""The process's meter: :func:`mas.llm.call.call_llm` writes it, :mod:`mas.sweep.progress` reads it."""
