"""Per-run budgets (config ``limits``): tokens, cost, wall time and model calls, checked before every model call.

A run that has reached a limit stops at its next step boundary (the next model call raises
:class:`RunLimitReached`). It is the system's own outcome, not an infrastructure failure: the run is recorded as
finished with ``limit: "<kind>"``, completion 0 when it left no final answer (the seed's rule), and it counts in
every rate. Since the check comes before a call, and every call in flight reserves the most it can use, a run's
tokens (cost) exceed ``limits.tokens`` (``limits.cost_usd``) by at most one call's, from its first call on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mas.llm.tokens import estimate_tokens

if TYPE_CHECKING:
    from mas.config import ModelRoute
    from mas.study_settings import LimitSettings
    from mas.tracing import Tracer

Reservation = tuple[int, float]
"""What one call in flight may use: (tokens, USD)."""


def call_bound(route: ModelRoute, messages: Sequence[Any], max_tokens: int | None = None) -> Reservation:
    """The most one call on ``route`` can use: its prompt (estimated) and its reply cap (``max_tokens``, else the
    route's), never more than the route's context window (tokens); and the route's price of those (USD).

    >>> from mas.config import ModelRoute
    >>> from langchain_core.messages import HumanMessage
    >>> route = ModelRoute(max_tokens=512, context_window=4096, price_input_per_1m=1.0, price_output_per_1m=2.0)
    >>> call_bound(route, [HumanMessage("x" * 4000)])
    (1512, 0.002024)
    """
    prompt = sum(estimate_tokens(str(getattr(m, "content", m))) for m in messages)
    total = min(route.context_window, prompt + (route.max_tokens if max_tokens is None else max_tokens))
    prompt = min(prompt, total)
    return total, route.cost_usd(prompt, total - prompt)


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
    the most it can use (:func:`call_bound`: its prompt and reply cap on its route, at the route's price) or,
    when more, the run's largest finished call. A call that what the run used and what the calls in flight
    reserve would take to the limit waits for those calls (:meth:`admit`): if the run has then reached the
    limit it is refused, else it starts. So a run ends at most one call past its token or cost limit, the
    first round of a debate included (before any call has finished, the largest call so far was 0), and a
    call that was let start is never cut short by a sibling's refusal (its tokens would be paid, not counted).
    """

    limits: LimitSettings
    started: float = field(default_factory=time.perf_counter)
    calls: int = 0
    """Model calls started so far (cache hits included: a replayed run must stop where the original did)."""
    in_flight: int = 0
    reserved_tokens: int = 0
    """What the calls in flight reserve (tokens)."""
    reserved_cost: float = 0.0
    """What the calls in flight reserve (USD)."""
    largest_tokens: int = 0
    """Tokens of the run's largest finished call (tokens)."""
    largest_cost: float = 0.0
    """Price of the run's largest finished call (USD)."""
    replayed_cost: float = 0.0
    """What the run's cache hits would have cost (USD): counted against ``limits.cost_usd``, so a replayed run stops
    where the original did instead of spending past it on the calls that miss the cache."""
    _freed: asyncio.Event | None = field(default=None, repr=False)

    def _reached(self, tracer: Tracer, *, reserved: bool) -> tuple[str, float, float] | None:
        """The first budget the run has used up (kind, used, limit), counting the reservations or not."""
        lim, totals = self.limits, tracer.totals
        used = {
            "tokens": totals["token_in"] + totals["token_out"] + (self.reserved_tokens if reserved else 0),
            "cost_usd": totals["cost_usd"] + self.replayed_cost + (self.reserved_cost if reserved else 0.0),
            "wall_s": time.perf_counter() - self.started,
            "model_calls": self.calls,
        }
        for kind, value in used.items():
            limit = getattr(lim, kind)
            if limit is not None and value >= limit:
                return kind, value, limit
        return None

    async def admit(self, tracer: Tracer, bound: Reservation = (0, 0.0)) -> Reservation:
        """:meth:`start`, once the calls in flight have finished when only their reservations stand in the way."""
        while self.in_flight and self._reached(tracer, reserved=True) and not self._reached(tracer, reserved=False):
            self._freed = self._freed or asyncio.Event()
            self._freed.clear()
            await self._freed.wait()
        return self.start(tracer, bound)

    def start(self, tracer: Tracer, bound: Reservation = (0, 0.0)) -> Reservation:
        """Before a call that can use ``bound`` (:func:`call_bound`): raise :class:`RunLimitReached` when the run
        has used up a budget, else count the call; returns its reservation, for :meth:`finish`."""
        if (reached := self._reached(tracer, reserved=True)) is not None:
            raise RunLimitReached(*reached)
        reserved = (max(bound[0], self.largest_tokens), max(bound[1], self.largest_cost))
        self.calls += 1
        self.in_flight += 1
        self.reserved_tokens += reserved[0]
        self.reserved_cost += reserved[1]
        return reserved

    def finish(self, tokens: int, cost_usd: float, saved_usd: float = 0.0, reserved: Reservation = (0, 0.0)) -> None:
        """After a call (answered, failed or cancelled: ``tokens`` 0 when it produced nothing); ``saved_usd``: what a
        cache hit did not pay again (USD); ``reserved``: what :meth:`start` returned for it."""
        self.in_flight -= 1
        self.reserved_tokens -= reserved[0]
        self.reserved_cost -= reserved[1]
        self.replayed_cost += saved_usd
        self.largest_tokens = max(self.largest_tokens, tokens)
        self.largest_cost = max(self.largest_cost, cost_usd + saved_usd)
        if self._freed is not None:
            self._freed.set()


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
