"""The sweep's spending limit (``limits.sweep_cost_usd``): which run may start, counting what runs in flight may spend.

A gate that looked only at finished runs let every free executor slot start a run while the sweep was still
under its limit: at concurrency 3, three $9,900 runs started under a $1 limit and spent $29,700. So each run in
flight reserves what one run may spend, and a run starts only while the spent money and the reservations stay
under the limit:

- with a per-run limit (``limits.cost_usd``), a run reserves that limit (a run passes it by at most one call);
- otherwise it reserves the most any finished run of the experiment spent (an estimate: a run may spend more);
- before any run has finished, with no per-run limit, nothing bounds a run: the first one runs alone.

So with a per-run limit the sweep ends at most one run past its own limit, whatever the concurrency; without
one, by one run plus what runs in flight spend beyond the costliest finished run. Runs wait for a reservation to free
(:meth:`SpendGate.take`) rather than being dropped: once the money spent reaches the limit, no run starts and the
sweep reports the rest as not started.
"""

from __future__ import annotations

import asyncio
import math

from mas.sweep.runner import RunSpec

WAIT = object()
"""What :meth:`SpendGate.take_nowait` returns when the next run must wait for a run in flight to finish."""


class SpendGate:
    """The runs still to start, handed out until the sweep has spent ``limit`` (USD).

    ``spent`` counts every finished run of the sweep, earlier invocations' included (a resume with the same limit
    starts nothing, one with a higher limit goes on); ``largest`` is the most one of them spent (USD);
    ``per_run`` the per-run limit (``limits.cost_usd``, USD), when set.
    """

    def __init__(self, specs: list[RunSpec], limit: float | None, spent: float, *, per_run: float | None = None,
                 largest: float | None = None) -> None:
        self.specs, self.limit, self.spent, self.per_run, self.largest = specs, limit, spent, per_run, largest
        self.stopped = False
        """True once the limit was reached with runs not started."""
        self.in_flight = 0
        self._next = 0
        self._changed: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self.specs)

    def reservation(self) -> float:
        """What a run in flight may spend (USD): see the module docstring; infinite when nothing bounds it."""
        bounds = [b for b in (self.per_run, self.largest) if b is not None]
        return max(bounds) if bounds else math.inf

    def take_nowait(self) -> RunSpec | object | None:
        """The next run (counted as in flight), :data:`WAIT` when it must wait for a run in flight, or None when
        every run was handed out or the limit is reached."""
        if self._next >= len(self.specs):
            return None
        if self.limit is not None:
            if self.spent >= self.limit:
                self.stopped = True
                return None
            if self.in_flight and self.spent + self.in_flight * self.reservation() >= self.limit:
                return WAIT
        spec = self.specs[self._next]
        self._next += 1
        self.in_flight += 1
        return spec

    async def take(self) -> RunSpec | None:
        """The next run, once the money spent and the runs in flight leave room for it; None when there is none."""
        while (spec := self.take_nowait()) is WAIT:
            self._changed = self._changed or asyncio.Event()
            self._changed.clear()
            await self._changed.wait()
        assert spec is None or isinstance(spec, RunSpec)
        return spec

    def finished(self, spent_usd: float | None) -> None:
        """A run handed out ended having spent ``spent_usd`` (None: it crashed, its spending unknown)."""
        self.in_flight -= 1
        if spent_usd is not None:
            self.spent += spent_usd
            self.largest = spent_usd if self.largest is None else max(self.largest, spent_usd)
        if self._changed is not None:
            self._changed.set()
