"""Sweep progress: a live rich bar on a terminal, periodic structlog lines otherwise (CI, nohup).

Both show runs done/total, successes, tokens, cost (USD) and an ETA. The
ETA uses only runs finished by this invocation, so runs skipped on resume
do not make it look faster than it is. Tokens count as calls finish, not
only as runs do, and the model calls in flight are shown with the age of
the oldest (from :data:`mas.llm.meter.METER`): a run of several minutes
shows its progress, and a slow or busy model server shows as such.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass, field
from typing import Literal, Protocol

from descriptor.records import RunResult
from mas.llm.meter import METER, MeterReading
from mas.logging import get_logger

log = get_logger(__name__)

ProgressMode = Literal["auto", "bar", "log", "none"]


@dataclass(kw_only=True, slots=True)
class SweepStats:
    """Running totals of a sweep (finished runs, including those found done on resume)."""

    total: int
    done: int = 0
    successes: int = 0
    errors: int = 0
    """Runs that ended in an infrastructure error (``status: error``; they count as done)."""
    tokens: int = 0
    cost_usd: float = 0.0
    skipped: int = 0
    """Runs already finished when the sweep started."""
    started: float = field(default_factory=time.monotonic)
    runs: frozenset[str] = frozenset()
    """Ids of the sweep's runs: the calls of these count in :meth:`live` before their run finishes."""
    calls_before: int = field(default_factory=lambda: METER.reading().calls_done)
    """Calls the process had finished before this sweep (not shown as its own)."""

    def live(self) -> tuple[int, MeterReading]:
        """(tokens of finished runs plus those of finished calls of runs in flight, the meter's reading)."""
        reading = METER.reading(self.runs)
        return self.tokens + reading.open_tokens, reading

    def add(self, result: RunResult, *, skipped: bool = False) -> None:
        self.done += 1
        self.successes += int(result.success)
        self.errors += int(result.status == "error")
        self.tokens += result.tokens_total
        self.cost_usd += result.cost_total_usd
        self.skipped += int(skipped)

    def eta_s(self) -> float | None:
        """Seconds left at this invocation's rate so far; None before its first run finishes."""
        ran = self.done - self.skipped
        if ran <= 0:
            return None
        return (time.monotonic() - self.started) / ran * (self.total - self.done)


class ProgressView(Protocol):
    def start(self, stats: SweepStats) -> None: ...

    def update(self, stats: SweepStats) -> None: ...

    async def tick(self, stats: SweepStats) -> None:
        """Runs for the whole sweep (periodic output); cancelled at the end."""

    def close(self, stats: SweepStats) -> None: ...


class NoProgress:
    def start(self, stats: SweepStats) -> None:
        pass

    def update(self, stats: SweepStats) -> None:
        pass

    async def tick(self, stats: SweepStats) -> None:
        await asyncio.Event().wait()

    def close(self, stats: SweepStats) -> None:
        pass


class LogProgress:
    """A structlog ``sweep progress`` line every ``interval_s`` seconds, and one at start and end."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self.interval_s = interval_s

    def _line(self, stats: SweepStats, event: str) -> None:
        eta = stats.eta_s()
        tokens, calls = stats.live()
        log.info(event, done=stats.done, total=stats.total, successes=stats.successes, errors=stats.errors,
                 tokens=tokens, calls=calls.calls_done - stats.calls_before, calls_in_flight=calls.in_flight,
                 oldest_call_s=None if calls.oldest_s is None else round(calls.oldest_s, 1),
                 **({"server": calls.notice} if calls.notice else {}),
                 cost_usd=round(stats.cost_usd, 6), skipped=stats.skipped,
                 elapsed_s=round(time.monotonic() - stats.started, 1), eta_s=None if eta is None else round(eta, 1))

    def start(self, stats: SweepStats) -> None:
        self._line(stats, "sweep started")

    def update(self, stats: SweepStats) -> None:
        pass

    async def tick(self, stats: SweepStats) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self._line(stats, "sweep progress")

    def close(self, stats: SweepStats) -> None:
        self._line(stats, "sweep stopped" if stats.done < stats.total else "sweep done")


class BarProgress:
    """A rich progress bar on stderr: done/total, successes, tokens, cost, elapsed and ETA."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(),
            TextColumn("ok {task.fields[successes]}  err {task.fields[errors]}  "
                       "tok {task.fields[tokens]:,}  ${task.fields[cost]:.4f}  {task.fields[calls]}"),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=Console(file=sys.stderr), refresh_per_second=4,
        )
        self.task = None

    def _fields(self, stats: SweepStats) -> dict[str, object]:
        tokens, calls = stats.live()
        return {"successes": stats.successes, "errors": stats.errors, "tokens": tokens, "cost": stats.cost_usd,
                "calls": calls_text(calls.calls_done - stats.calls_before, calls)}

    def start(self, stats: SweepStats) -> None:
        self.progress.start()
        # Runs found finished start the bar but are not "speed" samples, so the ETA ignores them.
        self.task = self.progress.add_task("sweep", total=stats.total, completed=stats.done, **self._fields(stats))

    def update(self, stats: SweepStats) -> None:
        self.progress.update(self.task, completed=stats.done, **self._fields(stats))

    async def tick(self, stats: SweepStats) -> None:
        while True:  # calls finish between runs: refresh their counts
            await asyncio.sleep(1.0)
            self.update(stats)

    def close(self, stats: SweepStats) -> None:
        self.update(stats)
        self.progress.stop()


def calls_text(done: int, calls: MeterReading) -> str:
    """``calls 12, 4 at the model (oldest 95 s)``: what the model is doing, in a few words.

    >>> calls_text(3, MeterReading(calls_done=3, in_flight=2, oldest_s=94.6, open_tokens=0))
    'calls 3, 2 at the model (oldest 95 s)'
    """
    said = f"; {calls.notice}" if calls.notice else ""
    if not calls.in_flight or calls.oldest_s is None:
        return f"calls {done}{said}"
    return f"calls {done}, {calls.in_flight} at the model (oldest {calls.oldest_s:.0f} s){said}"


def make_progress(mode: ProgressMode = "auto", *, interval_s: float = 10.0) -> ProgressView:
    """``auto``: the bar when stderr is a terminal, log lines otherwise."""
    if mode == "auto":
        mode = "bar" if sys.stderr.isatty() else "log"
    if mode == "bar":
        return BarProgress()
    if mode == "log":
        return LogProgress(interval_s)
    return NoProgress()
