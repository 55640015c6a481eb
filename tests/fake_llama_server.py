"""A stand-in for llama-server, run as its own process on 127.0.0.1 (never the real model): the stall watch's tests.

It takes llama-server's argv (``--host``, ``--port``, ...), answers ``/health``, ``/v1/models``, ``/metrics``
(llama.cpp's counter names), ``/slots`` and ``/v1/chat/completions`` (a JSON answer of the runtime's contract).
Its behaviour comes from the file named by ``$FAKE_LLAMA_MODE`` when it starts, which it then deletes (so the
server that replaces it behaves): ``stall`` answers health and metrics but no chat request, its counters still;
``silent`` stops answering anything once a chat request arrives; ``slow:S`` answers each chat request after S
seconds, its counters growing meanwhile. Without the file it answers at once. Each start is appended to the file
named by ``$FAKE_LLAMA_STARTS`` (its pid and mode).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = json.dumps({"reasoning": "r", "answer_artifact": "7", "confidence": 0.5})


def main(argv: list[str]) -> None:
    host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])
    mode_file = os.environ.get("FAKE_LLAMA_MODE", "")
    mode = "ok"
    if mode_file and os.path.exists(mode_file):
        with open(mode_file) as fh:
            mode = fh.read().strip()
        os.unlink(mode_file)
    if starts := os.environ.get("FAKE_LLAMA_STARTS"):
        with open(starts, "a") as fh:
            fh.write(f"{os.getpid()} {mode}\n")
    state = {"decoded": 0, "processing": 0, "silent": False}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, code: int, body: str, kind: str = "application/json") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if state["silent"]:
                time.sleep(3600)
            if self.path in ("/health", "/v1/models"):
                self._send(200, '{"status": "ok", "data": [{"id": "m"}]}')
            elif self.path == "/metrics":
                with lock:
                    text = (f"llamacpp:prompt_tokens_total {state['decoded']}\n"
                            f"llamacpp:tokens_predicted_total {state['decoded']}\n"
                            f"llamacpp:n_decode_total {state['decoded']}\n"
                            f"llamacpp:requests_processing {state['processing']}\n"
                            "llamacpp:requests_deferred 0\n")
                self._send(200, text, "text/plain")
            else:
                self._send(404, "{}")

        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path == "/tokenize":
                self._send(200, '{"tokens": [1, 2, 3]}')
                return
            with lock:
                state["processing"] += 1
            if mode == "stall":
                time.sleep(3600)
            if mode == "silent":
                state["silent"] = True
                time.sleep(3600)
            if mode.startswith("slow:"):
                end = time.monotonic() + float(mode.split(":")[1])
                while time.monotonic() < end:  # working: a token every 0.1 s
                    time.sleep(0.1)
                    with lock:
                        state["decoded"] += 1
            with lock:
                state["processing"] -= 1
                state["decoded"] += 5
            body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": ANSWER}}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}
            self._send(200, json.dumps(body))

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    print(f"fake llama-server {os.getpid()} on {host}:{port}, mode {mode}", flush=True)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main(sys.argv[1:])
