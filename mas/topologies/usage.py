"""What one model call cost and which model and route answered it: the fields a trace event's envelope carries."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mas.llm.call import LLMResult


@dataclass(kw_only=True, frozen=True, slots=True)
class Usage:
    """A model call's usage; the defaults (zeros, None) say no call was made."""

    token_in: int = 0
    token_out: int = 0
    latency_ms: float = 0.0
    """Wall-clock time of the call (ms)."""
    cost_usd: float = 0.0
    model: str | None = None
    """The call's model and route (None: no call was made)."""
    route: str | None = None
    usage_source: str | None = None
    cache_hit: bool | None = None
    """The reply came from the response cache (``cost_usd_saved``, USD, is what it did not pay again)."""
    cost_usd_saved: float | None = None

    @classmethod
    def of(cls, res: LLMResult) -> Usage:
        """The usage of the call that gave ``res``."""
        return cls(token_in=res.token_in, token_out=res.token_out, latency_ms=res.latency_ms, cost_usd=res.cost_usd,
                   model=res.model_label or None, route=res.route or None, usage_source=res.usage_source,
                   cache_hit=res.cache_hit or None, cost_usd_saved=res.cost_usd_saved if res.cache_hit else None)

    def envelope(self) -> dict[str, Any]:
        """The fields as :meth:`mas.tracing.Tracer.emit` takes them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
