"""Per-run budgets (config ``limits``): tokens, cost, wall time and model calls, checked before every model call.

A run that has reached a limit stops at its next step boundary (the next model call raises
:class:`RunLimitReached`). It is the system's own outcome, not an infrastructure failure: the run is recorded as
finished with ``limit: "<kind>"``, completion 0 when it left no final answer (the seed's rule), and it counts in
every rate. Since the check comes before a call, a run's tokens exceed ``limits.tokens`` by at most one call's.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mas.config import LimitSettings
    from mas.tracing import Tracer


class RunLimitReached(RuntimeError):
    """A run reached one of its budgets (``kind``: tokens, cost_usd, wall_s or model_calls)."""

    def __init__(self, kind: str, used: float, limit: float) -> None:
        super().__init__(f"run limit reached: limits.{kind} = {limit:g} (used {used:g})")
        self.kind = kind


@dataclass(kw_only=True, slots=True)
class RunBudget:
    """One run's limits and what it has used of those the tracer does not count."""

    limits: LimitSettings
    started: float = field(default_factory=time.perf_counter)
    calls: int = 0
    """Model calls started so far (cache hits included: a replayed run must stop where the original did)."""

    def check(self, tracer: Tracer) -> None:
        """Raise :class:`RunLimitReached` when the run has used up a budget; else count one more call."""
        lim, totals = self.limits, tracer.totals
        used = {
            "tokens": totals["token_in"] + totals["token_out"],
            "cost_usd": totals["cost_usd"],
            "wall_s": time.perf_counter() - self.started,
            "model_calls": self.calls,
        }
        for kind, value in used.items():
            limit = getattr(lim, kind)
            if limit is not None and value >= limit:
                raise RunLimitReached(kind, value, limit)
        self.calls += 1


_current: contextvars.ContextVar[RunBudget | None] = contextvars.ContextVar("mas_run_budget", default=None)


@contextlib.contextmanager
def use_budget(limits: LimitSettings | None) -> Iterator[RunBudget | None]:
    """Make a fresh budget of ``limits`` current for the enclosed run (nothing when no run limit is set)."""
    if limits is None or not limits.per_run():
        yield None
        return
    token = _current.set(budget := RunBudget(limits=limits))
    try:
        yield budget
    finally:
        _current.reset(token)


def current_budget() -> RunBudget | None:
    """The budget of the run being executed, or None."""
    return _current.get()
