"""The embedded server watched while this process has model calls in flight: one that makes no progress restarts.

Seen once on 2 shared cores: llama-server kept its threads busy but finished no call for 17 minutes and answered
neither ``/health`` nor ``/slots``, and the sweep waited on it with empty traces. So while calls are in flight a
thread of the process that uses the server reads the server's own progress every few seconds:

- ``/metrics`` (the server runs with ``--metrics``): the prompt tokens read, tokens written and decode steps so far,
  and the requests being processed or deferred;
- else ``/slots``: each slot's task and tokens decoded, and whether it is processing;
- else ``/health``: whether it answers at all.

Progress is any change of those counters, or the server saying it has nothing to do. When calls are in flight and
no progress has been seen for ``embedded.stall_timeout_s`` (whether the server answered or not), the watch says so
(on stderr, in the log and on the sweep's progress line, :data:`mas.llm.meter.METER`) and restarts the server on
the same port (:func:`mas.serving.server.restart_server`). The calls in flight lose their connection and are
retried like any failed call (traced as ``error`` events; a call whose retries run out is an infrastructure
error, redone by the next invocation), and their retries wait for the new server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from mas.llm.meter import METER
from mas.logging import get_logger

log = get_logger(__name__)

PROGRESS_COUNTERS = ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:n_decode_total")
"""``/metrics`` counters that grow while the server works (tokens read, tokens written, decode steps)."""
BUSY_GAUGES = ("llamacpp:requests_processing", "llamacpp:requests_deferred")
"""``/metrics`` gauges of the requests the server holds (decoding, or waiting for a slot)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Reading:
    """What one look at the server saw."""

    answered: bool
    """The server answered (``/metrics``, ``/slots`` or ``/health``)."""
    progress: tuple[Any, ...] | None = None
    """Its progress counters (None: it gave none); a change is progress."""
    busy: bool | None = None
    """Whether it holds requests (None: it did not say)."""


def _metrics(text: str) -> Reading | None:
    values: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in PROGRESS_COUNTERS or name in BUSY_GAUGES:
            with contextlib.suppress(ValueError):
                values[name] = float(value.split()[0])
    if not any(n in values for n in PROGRESS_COUNTERS):
        return None
    return Reading(answered=True, progress=tuple(values.get(n) for n in PROGRESS_COUNTERS),
                   busy=sum(values.get(n, 0.0) for n in BUSY_GAUGES) > 0)


def _slots(data: Any) -> Reading | None:
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        return None
    progress = tuple((s.get("id_task"), (s.get("next_token") or {}).get("n_decoded") if isinstance(
        s.get("next_token"), dict) else None) for s in data)
    return Reading(answered=True, progress=progress, busy=any(bool(s.get("is_processing")) for s in data))


def read_server(base_url: str, timeout_s: float) -> Reading:
    """One look at the server behind ``base_url`` (see the module docstring), each request waiting ``timeout_s``."""
    root = base_url.removesuffix("/").removesuffix("/v1")
    try:
        with httpx.Client(timeout=timeout_s) as client:
            r = client.get(f"{root}/metrics")
            if r.status_code == 200 and (seen := _metrics(r.text)) is not None:
                return seen
            r = client.get(f"{root}/slots")
            if r.status_code == 200:
                with contextlib.suppress(ValueError):
                    if (seen := _slots(r.json())) is not None:
                        return seen
            return Reading(answered=client.get(f"{root}/health").status_code == 200)
    except httpx.HTTPError:
        return Reading(answered=False)


class ServerWatch:
    """A daemon thread watching the server of ``base_url()`` for ``stall_s`` seconds without progress while
    ``in_flight()`` calls are in flight; it then calls ``restart(reason)``. ``active()`` False ends it."""

    def __init__(self, *, base_url: Callable[[], str], pid: Callable[[], int], restart: Callable[[str], None],
                 stall_s: float, in_flight: Callable[[], int] | None = None, active: Callable[[], bool] = lambda: True,
                 poll_s: float | None = None) -> None:
        self.base_url, self.pid, self.restart, self.stall_s, self.active = base_url, pid, restart, stall_s, active
        self.in_flight = in_flight or (lambda: METER.reading().in_flight)
        self.poll_s = min(5.0, stall_s / 4) if poll_s is None else poll_s
        self.restarts = 0
        self._noted = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mas-server-watch", daemon=True)

    def start(self) -> ServerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._say(None)

    def _say(self, notice: str | None) -> None:
        """Put ``notice`` on the progress line (None: take this watch's off)."""
        if notice is not None or self._noted:
            METER.note(notice)
        self._noted = notice is not None

    def _run(self) -> None:
        last, seen = time.monotonic(), None
        while not self._stop.wait(self.poll_s) and self.active():
            calls = self.in_flight()
            if not calls:
                last, seen = time.monotonic(), None
                continue
            reading = read_server(self.base_url(), timeout_s=min(10.0, max(1.0, self.stall_s / 4)))
            now = time.monotonic()
            if reading.busy is False or (reading.progress is not None and reading.progress != seen):
                last = now
            seen = reading.progress if reading.progress is not None else seen
            if now - last < self.stall_s:
                continue
            reason = (f"llama-server (pid {self.pid()}) produced no token for {now - last:.0f} s with {calls} "
                      f"model call(s) in flight{'' if reading.answered else ', and it answers no health check'}")
            self._say(f"embedded server stalled, restarting it (no token for {now - last:.0f} s)")
            log.warning("embedded_server_stalled", reason=reason)
            self.restarts += 1
            try:
                self.restart(reason)
            except Exception as err:  # the calls then fail against a dead server and say why (mas.llm.call)
                log.error("embedded_server_restart_failed", error=str(err)[:500])
                self._say(f"embedded server stalled and did not restart: {str(err)[:200]}")
            else:  # said for the rest of the sweep: its figures include calls retried on the new server
                self._say(f"embedded server restarted {self.restarts}x (last after {now - last:.0f} s without a "
                          "token)")
            last, seen = time.monotonic(), None
