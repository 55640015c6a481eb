"""Sweep progress: a live rich bar on a terminal, periodic structlog lines otherwise (CI, nohup).

Both show runs done/total, successes, tokens, cost (USD) and an ETA. The
ETA comes from the model calls this invocation finished (:mod:`mas.sweep.eta`),
so runs skipped on resume do not make it look faster than it is, and it is
shown only once it can be estimated. Tokens count as calls finish, not
only as runs do, and the model calls in flight are shown with the age of
the oldest (from :data:`mas.llm.meter.METER`): a run of several minutes
shows its progress, and a slow or busy model server shows as such. The bar
takes two lines, so that an 80-column terminal cuts none of it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from descriptor.records import RunResult
from mas.llm.meter import METER, MeterReading
from mas.logging import get_logger
from mas.sweep.eta import Group, eta_s

if TYPE_CHECKING:
    from rich.console import RenderableType

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
    groups: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Run id -> (benchmark, system) of the sweep's runs: the ETA counts calls per run by group."""
    left: Counter[Group] = field(init=False)
    """Runs not finished, by group (runs of no known group under None)."""
    done_runs: Counter[Group] = field(default_factory=Counter)
    """Runs this invocation finished, by group (not those found finished on resume)."""
    done_calls: Counter[Group] = field(default_factory=Counter)
    """Model calls those runs made, by group."""

    def __post_init__(self) -> None:
        self.left = Counter(self.groups.values())
        if unknown := self.total - len(self.groups):
            self.left[None] += unknown

    def live(self) -> tuple[int, MeterReading]:
        """(tokens of finished runs plus those of finished calls of runs in flight, the meter's reading)."""
        reading = METER.reading(self.runs)
        return self.tokens + reading.open_tokens, reading

    def add(self, result: RunResult, *, skipped: bool = False, calls: int = 0) -> None:
        """Count a finished run that made ``calls`` model calls (``skipped``: found finished on resume)."""
        self.done += 1
        self.successes += int(result.success)
        self.errors += int(result.status == "error")
        self.tokens += result.tokens_total
        self.cost_usd += result.cost_total_usd
        self.skipped += int(skipped)
        group: Group = (result.benchmark, result.system)
        if self.left[group] <= 0:
            group = None
        self.left[group] -= 1
        if not skipped:
            self.done_runs[group] += 1
            self.done_calls[group] += calls

    def eta_s(self, reading: MeterReading | None = None) -> float | None:
        """Seconds left (:func:`mas.sweep.eta.eta_s`, from the calls this invocation finished); None until it can
        be estimated. ``reading``: the meter's, when the caller has one."""
        reading = reading if reading is not None else METER.reading(self.runs)
        return eta_s(elapsed_s=time.monotonic() - self.started, left=self.left, done_runs=self.done_runs,
                     done_calls=self.done_calls, open_calls=reading.open_calls, in_flight=reading.in_flight)


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
        tokens, calls = stats.live()
        eta = stats.eta_s(calls)
        log.info(event, done=stats.done, total=stats.total, successes=stats.successes, errors=stats.errors,
                 tokens=tokens, calls=calls.calls_done - stats.calls_before, calls_in_flight=calls.in_flight,
                 oldest_call_s=None if calls.oldest_s is None else round(calls.oldest_s, 1),
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
    """A rich progress bar on stderr, on two lines: the bar with done/total, elapsed and ETA; then successes,
    errors, tokens, cost and the model's calls (wrapped at words, never cut, on a narrow terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.text import Text

        class TwoLines(Progress):
            def get_renderables(self) -> Iterable[RenderableType]:
                yield self.make_tasks_table(self.tasks)
                for task in self.tasks:
                    yield Text(str(task.fields.get("detail", "")))

        self.progress = TwoLines(
            TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta {task.fields[eta]}"),
            console=Console(file=sys.stderr), refresh_per_second=4,
        )
        self.task = None

    def _fields(self, stats: SweepStats) -> dict[str, object]:
        tokens, calls = stats.live()
        return {"eta": eta_text(stats.eta_s(calls)),
                "detail": f"ok {stats.successes}  err {stats.errors}  tok {tokens:,}  ${stats.cost_usd:.4f}  "
                          + calls_text(calls.calls_done - stats.calls_before, calls)}

    def start(self, stats: SweepStats) -> None:
        self.progress.start()
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


def eta_text(seconds: float | None) -> str:
    """``0:02:05`` (h:mm:ss), or ``-:--:--`` while there is no estimate.

    >>> eta_text(125.4), eta_text(None)
    ('0:02:05', '-:--:--')
    """
    if seconds is None:
        return "-:--:--"
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def calls_text(done: int, calls: MeterReading) -> str:
    """``calls 12, 4 at the model (oldest 95 s)``: what the model is doing, in a few words.

    >>> calls_text(3, MeterReading(calls_done=3, in_flight=2, oldest_s=94.6, open_tokens=0))
    'calls 3, 2 at the model (oldest 95 s)'
    """
    if not calls.in_flight or calls.oldest_s is None:
        return f"calls {done}"
    return f"calls {done}, {calls.in_flight} at the model (oldest {calls.oldest_s:.0f} s)"


def make_progress(mode: ProgressMode = "auto", *, interval_s: float = 10.0) -> ProgressView:
    """``auto``: the bar when stderr is a terminal, log lines otherwise."""
    if mode == "auto":
        mode = "bar" if sys.stderr.isatty() else "log"
    if mode == "bar":
        return BarProgress()
    if mode == "log":
        return LogProgress(interval_s)
    return NoProgress()
