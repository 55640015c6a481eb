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
    from mas.study_settings import LimitSettings
    from mas.tracing import Tracer


class RunLimitReached(RuntimeError):
    """A run reached one of its budgets (``kind``: tokens, cost_usd, wall_s or model_calls)."""

    def __init__(self, kind: str, used: float, limit: float) -> None:
        super().__init__(f"run limit reached: limits.{kind} = {limit:g} (used {used:g}, counting what the calls "
                         f"in flight may use)" if kind in ("tokens", "cost_usd") else
                         f"run limit reached: limits.{kind} = {limit:g} (used {used:g})")
        self.kind = kind


@dataclass(kw_only=True, slots=True)
class RunBudget:
    """One run's limits and what it has used of those the tracer does not count.

    Agents of one run call the model concurrently (a debate round), so a check that looked only at finished
    calls would let every agent of a round start its call just under the limit. Each call in flight reserves
    the size of the run's largest call so far; a call whose reservation would reach the limit is refused. So a
    run ends at most one call past its token or cost limit.
    """

    limits: LimitSettings
    started: float = field(default_factory=time.perf_counter)
    calls: int = 0
    """Model calls started so far (cache hits included: a replayed run must stop where the original did)."""
    in_flight: int = 0
    largest_tokens: int = 0
    """Tokens of the run's largest finished call (tokens)."""
    largest_cost: float = 0.0
    """Price of the run's largest finished call (USD)."""
    replayed_cost: float = 0.0
    """What the run's cache hits would have cost (USD): counted against ``limits.cost_usd``, so a replayed run stops
    where the original did instead of spending past it on the calls that miss the cache."""

    def start(self, tracer: Tracer) -> None:
        """Before a call: raise :class:`RunLimitReached` when the run has used up a budget, else count the call."""
        lim, totals = self.limits, tracer.totals
        used = {
            "tokens": totals["token_in"] + totals["token_out"] + self.in_flight * self.largest_tokens,
            "cost_usd": totals["cost_usd"] + self.replayed_cost + self.in_flight * self.largest_cost,
            "wall_s": time.perf_counter() - self.started,
            "model_calls": self.calls,
        }
        for kind, value in used.items():
            limit = getattr(lim, kind)
            if limit is not None and value >= limit:
                raise RunLimitReached(kind, value, limit)
        self.calls += 1
        self.in_flight += 1

    def finish(self, tokens: int, cost_usd: float, saved_usd: float = 0.0) -> None:
        """After a call (answered, failed or cancelled: ``tokens`` 0 when it produced nothing); ``saved_usd``: what a
        cache hit did not pay again (USD)."""
        self.in_flight -= 1
        self.replayed_cost += saved_usd
        self.largest_tokens = max(self.largest_tokens, tokens)
        self.largest_cost = max(self.largest_cost, cost_usd + saved_usd)


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
