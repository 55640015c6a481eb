"""Per-endpoint client-side limits: slots held only while a request is at the endpoint."""

from __future__ import annotations

import asyncio

import httpx

from mas.llm.limits import SlotTransport, endpoint_slot
from tests.test_sweep import FakeOpenAI


def test_slot_transport_bounds_requests_and_passes_bodies_through():
    server = FakeOpenAI(delay_s=0.05, gzip_body=True)
    transport = SlotTransport(f"{server.base_url}|fake", limit=2)

    async def post_all() -> list[dict]:
        async with httpx.AsyncClient(transport=transport) as client:
            replies = await asyncio.gather(*(client.post(f"{server.base_url}/chat/completions", json={"i": i})
                                             for i in range(6)))
        return [r.json() for r in replies]

    try:
        # Two event loops in turn, as two sweeps in one process: each gets its own slots and connections.
        for _ in range(2):
            bodies = asyncio.run(post_all())
            # gzip bodies are decoded once, by the client, as without the transport
            assert len({b["id"] for b in bodies}) == 6
            assert all(b["object"] == "chat.completion" and b["usage"]["completion_tokens"] == 5 for b in bodies)
        assert server.peak == 2 and server.requests == 12
    finally:
        server.close()


async def test_endpoint_slot_is_shared_per_endpoint_and_limit():
    async def holders(endpoint: str, limit: int | None, n: int) -> int:
        active = peak = 0

        async def one() -> None:
            nonlocal active, peak
            async with endpoint_slot(endpoint, limit):
                active += 1
                peak = max(peak, active)
                await asyncio.sleep(0.01)
                active -= 1

        await asyncio.gather(*(one() for _ in range(n)))
        return peak

    assert await holders("a", 3, 8) == 3
    assert await holders("a", None, 8) == 8  # no limit configured: no slot at all
