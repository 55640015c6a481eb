"""A scriptable OpenAI-compatible endpoint on 127.0.0.1 for tests: each request is answered by a function.

``FakeEndpoint(reply)`` calls ``reply(n, request)`` for the n-th request (1-based; ``request`` is the decoded
JSON body, its HTTP headers under ``_headers``, lower-cased) and sends back the ``(status, headers, body)`` it returns
(``body``: bytes, or an iterable of byte chunks each sent when it comes, with a content-length header given by
the reply); :func:`completion` builds a 200 chat
completion. ``connections`` counts the TCP connections it accepted (with ``keep_alive``, a client that pools its
connections opens one per request in flight at most). The server runs in a thread of the test process (a CLI started by the test reaches it too) and is
stopped by :meth:`FakeEndpoint.close`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], Any]


def completion(content: str, n: int = 0) -> Reply:
    """A 200 chat completion whose message is ``content``."""
    body = {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}
    return 200, {"content-type": "application/json"}, json.dumps(body).encode()


def tool_calls(calls: list[tuple[str, str]], n: int = 0) -> Reply:
    """A 200 chat completion asking for native tool calls, each ``(name, arguments as the raw string)``."""
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(calls)]}
    body = {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}
    return 200, {"content-type": "application/json"}, json.dumps(body).encode()


def answer(artifact: str, n: int = 0) -> Reply:
    """A completion holding the runtime's answer contract with ``artifact`` as the answer."""
    return completion(json.dumps({"reasoning": "r", "answer_artifact": artifact, "confidence": 0.9}), n)


class FakeEndpoint:
    def __init__(self, reply: Callable[[int, dict[str, Any]], Reply], *, keep_alive: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.connections = 0
        lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keeps connections open between requests, as llama-server and hosted endpoints do.
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with lock:
                    fake.connections += 1

            def do_POST(self) -> None:
                import time

                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    request = {}
                request["_headers"] = {k.lower(): v for k, v in self.headers.items()}
                with lock:
                    fake.requests.append(request)
                    fake.times.append(time.monotonic())
                    n = len(fake.requests)
                code, headers, body = reply(n, request)
                self.send_response(code)
                length = {"content-length": str(len(body))} if isinstance(body, bytes) else {}
                for k, v in {**length, **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    for chunk in [body] if isinstance(body, bytes) else body:  # chunks: sent as they come
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except OSError:  # the client gave up
                    pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # tens of clients connecting at once are not refused and retried

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def prompt_text(request: dict[str, Any]) -> str:
    """Every message's text of a chat request, joined."""
    parts = []
    for m in request.get("messages", []):
        c = m.get("content")
        parts.append(c if isinstance(c, str) else json.dumps(c))
    return "\n".join(parts)
