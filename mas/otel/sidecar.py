"""Live export from a sidecar process: the sweep hands each finished run's trace lines to a child that sends them.

Building a run's spans (:mod:`mas.otel.mapping`), turning them into SDK spans
and encoding them as OTLP protobuf cost about 2.3 ms of CPU per scripted
debate run (38 spans). Done in the sweep's process it competed with the runs
for the GIL, +6.6 % wall time. The child (``python -m mas.otel.sidecar``, its URL in
the environment, one per process and endpoint, started on first use) does all of that on
another core with the OpenTelemetry SDK's batch processor and OTLP/HTTP
exporter (:mod:`mas.otel.export`), at a lower priority (nice 10) so that it
yields when it shares a core with the sweep; the sweep only joins the run's
trace lines, already redacted, into one frame and queues it (0.14 ms per
scripted debate run).

The protocol is one JSON object per line on the child's stdin: a run
(``{"meta": RunMetadata, "end": iso, "record_inputs": bool, "events": [...]}``)
or a flush request (``{"flush": n}``), answered on its stdout by
``flushed <n> <1|0>`` once everything before it was sent. At end of input
the child flushes and exits, so a sweep killed with -9 leaves no orphan
behind (its pipe closes). The child's environment lacks the model routes' API
keys (it needs only the ``OTEL_*`` settings).

Export never blocks or fails a run: frames go through a bounded queue that a
writer thread drains; when the child has fallen that far behind, or died,
runs' spans are dropped and counted, with one warning. The JSONL trace stays
the record; ``main.py export-otel`` can send it again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from descriptor.events import Event
from descriptor.io import json_bytes
from descriptor.records import RunMetadata
from descriptor.redact import redact, registered_secret_env
from mas.logging import get_logger
from mas.tracing import utc_now_iso

log = get_logger(__name__)

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
QUEUE_RUNS = 1000
"""Runs queued for the child at most (~20 KB each); beyond that a run's spans are dropped, not waited for."""
URL_ENV = "MAS_OTEL_SIDECAR_URL"
"""The environment variable handing the child its endpoint URL."""
STOP_TIMEOUT_S = 30.0
"""How long a closing sweep waits for the child to send what it holds before killing it."""


class Sidecar:
    """The parent's end of one child exporter process for ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url
        secrets = registered_secret_env()
        env = {k: v for k, v in os.environ.items() if k not in secrets}
        # The child imports this package as the sweep did, wherever the sweep was started from.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
        # In the environment, not argv: every local user can read a process's argv (``ps``), and the URL may
        # hold a password (``http://user:pw@host``).
        env[URL_ENV] = url
        self.proc = subprocess.Popen([sys.executable, "-m", "mas.otel.sidecar"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        self.dropped = 0
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE_RUNS)
        self._answers: dict[int, bool] = {}
        self._answered = threading.Condition()
        self._alive = True
        self._flushes = 0
        threading.Thread(target=self._write, args=(self.proc.stdin,), name="otel-sidecar-writer", daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stdout,), name="otel-sidecar-reader", daemon=True).start()

    def send(self, frame: bytes) -> None:
        """Queue one run's frame; never waits."""
        try:
            self._queue.put_nowait(frame)
        except queue.Full:
            self._drop("the exporter process is behind")

    def flush(self, timeout_s: float) -> bool:
        """Wait until every run queued so far was sent; False when that took longer than ``timeout_s``."""
        with self._answered:
            self._flushes += 1
            n = self._flushes
        try:
            self._queue.put(json.dumps({"flush": n, "timeout_s": timeout_s}).encode() + b"\n", timeout=timeout_s)
        except queue.Full:
            return False
        with self._answered:
            self._answered.wait_for(lambda: n in self._answers or not self._alive, timeout_s)
            return self._answers.pop(n, False)

    def close(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Let the child send what it holds and exit; kill it by PID after ``timeout_s``."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.dropped:
            log.warning("spans of some runs were not exported", runs=self.dropped, endpoint=self.url)

    def _drop(self, why: str) -> None:
        self.dropped += 1
        if self.dropped == 1:
            log.warning("not exporting a run's spans", reason=why, endpoint=self.url)

    def _write(self, pipe: IO[bytes]) -> None:
        while (frame := self._queue.get()) is not None:
            if not self._alive:
                self._drop("the exporter process exited")
                continue
            try:
                pipe.write(frame)
                pipe.flush()
            except OSError:  # the child died: its pipe is broken
                self._alive = False
                self._drop("the exporter process exited")
        with contextlib.suppress(OSError):
            pipe.close()

    def _read(self, pipe: IO[bytes]) -> None:
        for line in pipe:
            word, _, rest = line.decode(errors="replace").partition(" ")
            if word == "flushed":
                n, _, ok = rest.strip().partition(" ")
                with self._answered:
                    self._answers[int(n)] = ok == "1"
                    self._answered.notify_all()
        with self._answered:
            self._alive = False
            self._answered.notify_all()


_SIDECARS: dict[str, Sidecar] = {}
_LOCK = threading.Lock()


def sidecar(url: str) -> Sidecar:
    """This process's exporter process for ``url`` (started on first use, stopped at exit)."""
    with _LOCK:
        if url not in _SIDECARS:
            if not _SIDECARS:
                atexit.register(shutdown_all)
            _SIDECARS[url] = Sidecar(url)
        return _SIDECARS[url]


def flush_all(timeout_s: float = 30.0) -> bool:
    """Send every run's spans queued so far; False when an endpoint did not take them within ``timeout_s``."""
    return all(s.flush(timeout_s) for s in list(_SIDECARS.values()))


def shutdown_all() -> None:
    with _LOCK:
        cars = list(_SIDECARS.values())
        _SIDECARS.clear()
    for car in cars:
        car.close()


class OtelRunExporter:
    """Trace processor: hands a run's trace lines to the exporter process when the run ends (its tracer closes).

    The node and root spans need the run's last event, so nothing is sent before then.
    """

    def __init__(self, url: str, meta: RunMetadata, *, config: dict[str, Any] | None = None,
                 record_inputs: bool = False) -> None:
        self.url = url
        self.meta = meta
        self.config = config
        """The run's config, sent inline: the child names the spans' providers from its routes, and the metadata
        holds only its hash (:mod:`descriptor.run_config`)."""
        self.record_inputs = record_inputs
        self.lines: list[str] = []

    def on_event(self, event: Event, line: str) -> None:
        self.lines.append(line)

    def close(self) -> None:
        # The metadata as metadata.json holds it (a task or an error may quote a secret: redacted by the one
        # writer's serializer); the lines are redacted already.
        record = self.meta if self.config is None else self.meta.model_copy(update={"config": self.config})
        meta = json_bytes(record, indent=None).rstrip(b"\n")
        tail = f',"end":"{utc_now_iso()}","record_inputs":{json.dumps(self.record_inputs)},"events":['
        frame = b'{"meta":' + meta + tail.encode() + ",".join(self.lines).encode() + b"]}\n"
        self.lines = []
        sidecar(self.url).send(frame)


EXIT_FLUSH_S = 3.0
"""Seconds the child spends on what is still queued once its input has ended (s)."""


def main(argv: list[str] | None = None) -> int:
    """The child: read frames from stdin until it closes, export them, answer flushes on stdout."""
    from descriptor.events import parse_event
    from mas.otel.export import flush_sinks, queue_run, sink

    (url,) = [os.environ[URL_ENV]] if argv is None else argv
    from mas.logging import configure_logging

    configure_logging("WARNING")  # the exporter's own log lines may quote the endpoint: redacted like ours
    os.nice(10)  # background work: where it shares a core with the sweep, the sweep goes first
    for raw in sys.stdin.buffer:
        try:
            msg = json.loads(raw)
            if "flush" in msg:
                ok = sink(url).force_flush(int(float(msg.get("timeout_s", 30.0)) * 1000))
                sys.stdout.write(f"flushed {int(msg['flush'])} {int(ok)}\n")
                sys.stdout.flush()
                continue
            queue_run(url, RunMetadata.model_validate(msg["meta"]), end=msg["end"],
                      events=[parse_event(e) for e in msg["events"]], record_inputs=bool(msg["record_inputs"]))
        except Exception as err:  # noqa: BLE001 - a bad frame loses that run's spans, not the others'
            print(redact(f"mas.otel.sidecar: a run's spans were not exported: {type(err).__name__}: {err}"),
                  file=sys.stderr)
    # End of input: a sweep that exits flushes first (it waits for our answer), so little is left; a sweep killed
    # with -9 waits for nothing, and a slow or silent endpoint held this process 11-18 s after it (the
    # exporter's timeout and retries). What is queued gets EXIT_FLUSH_S, then the process ends without joining
    # the exporter's threads; the JSONL traces stay the record (``export-otel`` sends them again).
    flush_sinks(EXIT_FLUSH_S)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - printed like Python would, redacted: the endpoint's URL may hold a password
        from mas.logging import redacted_traceback

        sys.stderr.write(redacted_traceback())
        sys.exit(1)
