"""Client-side limits of one endpoint (``rate_limit`` in a route), shared by every run that calls it.

Each run has its own chat models, so a limit per model would let C
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

Connections: one HTTP client per endpoint and process (:func:`slot_limited_client`), on the HTTP stack the
OpenAI SDK itself is built on (:func:`sdk_httpx`: ``httpx2`` for ``openai`` 3, ``httpx`` before), its pool
sized to the route's ``max_concurrent`` (no limit without one) and every connection kept alive between calls:
a pool smaller than the calls in flight closed and reopened a connection for nearly every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import threading
import weakref
from functools import cache, lru_cache
from types import ModuleType
from typing import Any

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


@cache
def sdk_httpx() -> ModuleType:
    """The ``httpx`` module the installed OpenAI SDK builds its clients on: ``httpx2`` for ``openai`` 3, ``httpx``
    before (read from the SDK's own default client class, so a later SDK that moves again is followed)."""
    import openai

    base = next(c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient")
    return importlib.import_module(base.__module__.partition(".")[0])


class SlotTransport:
    """An async transport of ``http`` (an ``httpx`` module: by default the SDK's, :func:`sdk_httpx`) that sends
    each request inside one of the endpoint's slots.

    The response is read whole inside the slot (the endpoint is busy until
    its last byte) and handed on as an in-memory response, so the caller's
    parsing happens after the slot is free. Connections are pooled per event
    loop (a pooled connection belongs to the loop that opened it), at most
    ``limit`` of them (no limit when None), each kept alive between calls.
    """

    def __init__(self, endpoint: str, limit: int | None, deadline_s: float | None = None, *,
                 http: ModuleType | None = None) -> None:
        self.endpoint, self.limit, self.deadline_s = endpoint, limit, deadline_s
        self.http = http or sdk_httpx()
        # Every connection may stay open: with fewer kept alive than calls in flight, each call past that number
        # opened a connection and closed it after its reply.
        self.limits = self.http.Limits(max_connections=limit, max_keepalive_connections=limit)
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def _pool(self) -> Any:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            pool = self._pools[loop] = self.http.AsyncHTTPTransport(limits=self.limits)
        return pool

    async def handle_async_request(self, request: Any) -> Any:
        pool = self._pool()
        async with endpoint_slot(self.endpoint, self.limit):
            try:
                # httpx's timeouts are per phase (a read may take that long, and then the next): an endpoint
                # sending a byte a second kept a call with timeout_s = 5 alive for minutes. The deadline holds
                # the whole exchange, connect to last byte; past it the call fails like any timeout (retried).
                async with asyncio.timeout(self.deadline_s):
                    response = await pool.handle_async_request(request)
                    try:
                        raw = b"".join([chunk async for chunk in response.stream])
                    finally:
                        await response.aclose()
            except TimeoutError:
                raise self.http.ReadTimeout(f"no complete reply within the route's timeout_s ({self.deadline_s} s)",
                                            request=request) from None
        # Raw bytes and the original headers: the client decodes (gzip, ...) as it would have.
        return self.http.Response(response.status_code, headers=response.headers,
                                  stream=self.http.ByteStream(raw), extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        if (pool := self._pools.pop(loop, None)) is not None:
            await pool.aclose()

    async def __aenter__(self) -> SlotTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@lru_cache
def slot_limited_client(endpoint: str, limit: int | None, timeout: float | None) -> Any:
    """The async HTTP client of an endpoint with ``max_concurrent = limit`` (None: no limit): the SDK's default
    client class (its own defaults) on a :class:`SlotTransport`. One per process, like ``langchain_openai``'s own
    default clients, so connections are pooled across runs; unlike those, its connections are pooled per event
    loop, so a second ``asyncio.run`` in the process (``run --rollback`` runs the sweep, then the rollbacks) never
    reuses a connection of a closed loop ("Event loop is closed")."""
    import openai

    return openai.DefaultAsyncHttpxClient(transport=SlotTransport(endpoint, limit, timeout), timeout=timeout)
