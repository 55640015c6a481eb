"""Per-endpoint client-side limits: slots held only while a request is at the endpoint."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from mas.limits import SlotTransport, endpoint_slot


class GzipServer:
    """A loopback HTTP server: each request takes ``delay_s`` and gets a gzip-encoded JSON body."""

    def __init__(self, delay_s: float) -> None:
        self.active = self.peak = 0
        lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with lock:
                    srv.active += 1
                    srv.peak = max(srv.peak, srv.active)
                try:
                    time.sleep(delay_s)
                    data = gzip.compress(json.dumps({"path": self.path, "pad": "x" * 5000}).encode())
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-encoding", "gzip")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with lock:
                        srv.active -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gzip_server():
    srv = GzipServer(delay_s=0.05)
    yield srv
    srv.close()


def test_slot_transport_bounds_requests_and_passes_bodies_through(gzip_server):
    transport = SlotTransport(f"{gzip_server.url}|test", limit=2)

    async def fetch_all() -> list[dict]:
        async with httpx.AsyncClient(transport=transport) as client:
            replies = await asyncio.gather(*(client.get(f"{gzip_server.url}/r{i}") for i in range(6)))
        return [r.json() for r in replies]

    # Two event loops in turn, as two sweeps in one process: each gets its own slots and connections.
    for _ in range(2):
        bodies = asyncio.run(fetch_all())
        assert [b["path"] for b in bodies] == [f"/r{i}" for i in range(6)]  # decoded once, in order
        assert len(bodies[0]["pad"]) == 5000
    assert gzip_server.peak == 2


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
