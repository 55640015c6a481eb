"""Client-side limits of one endpoint (``rate_limit`` in a route), shared by every run that calls it.

Each run builds its own chat models, so a limit per model would let C
concurrent runs use C times the endpoint. Both limits are therefore kept per
endpoint (base URL + model, and the configured value, so two routes that
configure different limits for one endpoint do not silently take each
other's):

- ``requests_per_minute``: one LangChain ``InMemoryRateLimiter`` per endpoint
  in this process (it holds only a thread lock and polls with
  ``asyncio.sleep``, so runs on different event loops can share it).
- ``max_concurrent``: one semaphore per endpoint and event loop, held only
  while a request is *at the endpoint*: the HTTP exchange up to the last
  byte of the response (:class:`SlotTransport`), or the scripted model's
  simulated latency. A slot is the endpoint's capacity; the client's own
  work around a call (callbacks, building the request, parsing the reply)
  must not keep it from the next request. Holding it over the whole
  LangChain call left each slot idle ~7 ms per 200 ms call under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from functools import lru_cache
from typing import Any

import httpx
from langchain_core.rate_limiters import InMemoryRateLimiter

from mas.config import ModelRoute

_limiters: dict[tuple[str, str, float], InMemoryRateLimiter] = {}
_limiters_lock = threading.Lock()
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary())


def shared_rate_limiter(route: ModelRoute, base_url: str | None, model_name: str) -> InMemoryRateLimiter | None:
    """The one ``requests_per_minute`` limiter of an endpoint (``base_url`` + model) in this process."""
    rpm = route.rate_limit.requests_per_minute
    if rpm is None:
        return None
    key = (base_url or "(provider default)", model_name, rpm)
    with _limiters_lock:
        if key not in _limiters:
            _limiters[key] = InMemoryRateLimiter(requests_per_second=rpm / 60.0, check_every_n_seconds=0.05,
                                                 max_bucket_size=1)
        return _limiters[key]


def endpoint_slot(endpoint: str, limit: int | None) -> contextlib.AbstractAsyncContextManager[Any]:
    """Hold one of the endpoint's ``limit`` slots (a no-op when ``limit`` is None).

    The semaphore is per event loop (an asyncio primitive serves one loop),
    kept weakly so a closed loop's semaphores go with it.
    """
    if limit is None:
        return contextlib.nullcontext()
    per_loop = _slots.setdefault(asyncio.get_running_loop(), {})
    if (endpoint, limit) not in per_loop:
        per_loop[endpoint, limit] = asyncio.Semaphore(limit)
    return per_loop[endpoint, limit]


class SlotTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends each request inside one of the endpoint's slots.

    The response is read whole inside the slot (the endpoint is busy until
    its last byte) and handed on as an in-memory response, so the caller's
    parsing happens after the slot is free. Connections are pooled per event
    loop: a pooled connection belongs to the loop that opened it.
    """

    def __init__(self, endpoint: str, limit: int | None, deadline_s: float | None = None) -> None:
        self.endpoint, self.limit, self.deadline_s = endpoint, limit, deadline_s
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncHTTPTransport] = (
            weakref.WeakKeyDictionary())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop) or self._pools.setdefault(loop, httpx.AsyncHTTPTransport())
        async with endpoint_slot(self.endpoint, self.limit):
            try:
                # httpx's timeouts are per phase (a read may take that long, and then the next): an endpoint
                # sending a byte a second kept a call with timeout_s = 5 alive for minutes. The deadline holds
                # the whole exchange, connect to last byte; past it the call fails like any timeout (retried).
                async with asyncio.timeout(self.deadline_s):
                    response = await pool.handle_async_request(request)
                    try:
                        raw = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
                    finally:
                        await response.aclose()
            except TimeoutError:
                raise httpx.ReadTimeout(f"no complete reply within the route's timeout_s ({self.deadline_s} s)",
                                        request=request) from None
        # Raw bytes and the original headers: the client decodes (gzip, ...) as it would have.
        return httpx.Response(response.status_code, headers=response.headers, stream=httpx.ByteStream(raw),
                              extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        if (pool := self._pools.pop(loop, None)) is not None:
            await pool.aclose()


@lru_cache
def slot_limited_client(endpoint: str, limit: int | None, timeout: float | None) -> httpx.AsyncClient:
    """The async HTTP client of an endpoint with ``max_concurrent = limit`` (None: no limit). One per process,
    like ``langchain_openai``'s own default clients, so connections are pooled across runs; unlike those, its
    connections are pooled per event loop, so a second ``asyncio.run`` in the process (``run --rollback`` runs
    the sweep, then the rollbacks) never reuses a connection of a closed loop ("Event loop is closed")."""
    return httpx.AsyncClient(transport=SlotTransport(endpoint, limit, timeout), timeout=timeout)
