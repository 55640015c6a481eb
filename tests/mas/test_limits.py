"""Per-endpoint client-side limits: slots held only while a request is at the endpoint, and one pool of
connections per endpoint and process, kept alive between calls."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from mas.config import ExperimentConfig, ModelRoute
from mas.llm.limits import SlotTransport, endpoint_slot, sdk_httpx, slot_limited_client
from tests.fake_endpoint import answer, completion
from tests.mas.test_sweep import FakeOpenAI


def test_slot_transport_bounds_requests_and_passes_bodies_through():
    server = FakeOpenAI(delay_s=0.05, gzip_body=True)
    transport = SlotTransport(f"{server.base_url}|fake", limit=2)
    http = sdk_httpx()

    async def post_all() -> list[dict]:
        async with http.AsyncClient(transport=transport) as client:
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


def test_the_client_is_the_sdks_own_stack():
    """The transport is built on the httpx the OpenAI SDK uses (``httpx2`` for openai 3): a client of the other
    stack is converted by the SDK on every call and pooled by an older connection pool."""
    import openai

    client = slot_limited_client("http://127.0.0.1:9/v1|m", 3, 5.0)
    assert isinstance(client, openai.DefaultAsyncHttpxClient)
    assert isinstance(client, sdk_httpx().AsyncClient)


def _slow(delay_s: float):
    def reply(n: int, request: dict) -> tuple:
        time.sleep(delay_s)
        return completion("ok", n)

    return reply


def test_calls_in_waves_reuse_their_connections(endpoint):
    """40 calls at once, three times over, through the endpoint's client: 40 connections, not one per call
    (a pool keeping 20 alive opened 20 new ones for each later wave)."""
    server = endpoint(_slow(0.1), keep_alive=True)
    client = slot_limited_client(f"{server.base_url}|waves", None, 30.0)

    async def waves() -> None:
        for _ in range(3):
            replies = await asyncio.gather(*(client.post(f"{server.base_url}/chat/completions", json={"i": i})
                                             for i in range(40)))
            assert all(r.status_code == 200 for r in replies)

    asyncio.run(waves())
    assert len(server.requests) == 120
    assert server.connections <= 40


def test_a_limited_route_opens_at_most_its_limit_of_connections(endpoint):
    server = endpoint(_slow(0.05), keep_alive=True)
    client = slot_limited_client(f"{server.base_url}|limited", 3, 30.0)

    async def calls() -> None:
        await asyncio.gather(*(client.post(f"{server.base_url}/chat/completions", json={"i": i}) for i in range(30)))

    asyncio.run(calls())
    assert len(server.requests) == 30 and server.connections <= 3


def test_a_sweep_keeps_its_connections_across_runs(endpoint, tmp_path: Path):
    """16 ``debate`` runs at once, the three debaters' calls in flight together (48 at most), round after round:
    the runs share one pool, so the endpoint sees at most one connection per call in flight, not one per call
    (a pool keeping 20 alive opened 130 for 256 calls of 32 runs)."""
    from mas.sweep.experiment import ExperimentRequest, run_experiment

    def reply(n: int, request: dict) -> tuple:
        time.sleep(0.3)  # long enough for the runs' calls to overlap on a busy machine
        return answer("7", n)

    server = endpoint(reply, keep_alive=True)
    cfg = ExperimentConfig(output_root=str(tmp_path), concurrency=16, mas={"agents": 3}, models={
        "default": ModelRoute(provider="openai", model="keep", base_url=server.base_url)})
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=["debate"], task_limit=16, runs_per_task=1,
                            experiment_id="keep", progress="none")
    results = asyncio.run(run_experiment(req))
    assert len(results) == 16 and all(r.status == "finished" for r in results)
    assert len(server.requests) >= 16 * 6
    assert server.connections <= 16 * 3, (server.connections, len(server.requests))


def test_runs_share_the_routes_model_clients(tmp_path: Path):
    """Each run's model is a copy of one model per route and process (with the run's seed): the SDK clients and
    their pool are built once, not per run."""
    from mas.llm.models import ModelSet

    cfg = ExperimentConfig(output_root=str(tmp_path), models={
        "default": ModelRoute(provider="openai", model="share", base_url="http://127.0.0.1:9/v1")})
    a, b = (ModelSet(cfg, seed=s).for_role("agent").model for s in (1, 2))
    assert (a.seed, b.seed) == (1, 2) and a is not b
    assert a.root_async_client is b.root_async_client and type(a) is type(b)
    other = ExperimentConfig(output_root=str(tmp_path), models={
        "default": ModelRoute(provider="openai", model="share", base_url="http://127.0.0.1:9/v1", temperature=1.0)})
    c = ModelSet(other, seed=1).for_role("agent").model
    assert c.root_async_client is not a.root_async_client and c.temperature == 1.0 and type(c) is type(a)


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
