"""Drive a real headless Chromium over the DevTools protocol (a websocket), for report tests and benchmarks.

No selenium or playwright: Debian's ``chromium`` package and the ``websockets``
client. The browser is started on 127.0.0.1 with a private profile directory,
and stopped by its PID (``Browser.close``, then terminate/kill of the process
this object started). Everything a page logs as an error, every uncaught
exception and every request to anything but ``file:``/``data:``/``about:``
is recorded, so a test can assert that a page opened cleanly and offline.

    with Chromium(tmp_dir) as browser:
        browser.open("file:///.../index.html")
        browser.evaluate("document.title")
        browser.problems()   # [] when the page logged no error and fetched nothing
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
         "--disable-extensions", "--mute-audio", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")
LOCAL_SCHEMES = ("file:", "data:", "about:", "chrome:", "devtools:", "chrome-error:")


def find_chromium() -> str | None:
    """Path of a Chromium binary (Debian: ``chromium``), or None."""
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


class Chromium:
    """One headless Chromium with one page, controlled over CDP."""

    def __init__(self, profile_dir: str | Path, *, width: int = 1280, height: int = 900, timeout_s: float = 30.0):
        binary = find_chromium()
        if binary is None:
            raise RuntimeError("no chromium binary on PATH (Debian: apt-get install -y chromium)")
        self.profile = Path(profile_dir)
        self.profile.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self._log = open(self.profile / "chromium.log", "wb")
        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}",
                                      f"--window-size={width},{height}", "about:blank"],
                                     stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.events: list[dict[str, Any]] = []
        self._id = 0
        self._stack = contextlib.ExitStack()
        try:
            port = self._wait_port()
            pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
            page = next(p for p in pages if p.get("type") == "page")
            self._stack.enter_context(ws := connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10))
            self.ws = ws
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.send(f"{domain}.enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    def _wait_port(self) -> int:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}; see {self.profile / 'chromium.log'}")
            if port_file.is_file() and (text := port_file.read_text().split()):
                return int(text[0])
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._id += 1
        my = self._id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params or {}}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, since: int = 0) -> dict[str, Any]:
        """The first event named ``method`` at or after position ``since`` of :attr:`events` (waits for it)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            for ev in self.events[since:]:
                if ev.get("method") == method:
                    return ev
            self.events.append(json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic()))))

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        mark = len(self.events)
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", mark)

    def evaluate(self, expression: str) -> Any:
        """Value of a JavaScript expression in the page (awaits promises)."""
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression!r} threw: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def dom_content_loaded_ms(self) -> float:
        """Navigation start to the end of DOMContentLoaded of the current page (ms, Navigation Timing)."""
        return float(self.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"))

    def screenshot(self, path: str | Path, *, height: int | None = None) -> None:
        """PNG of the page's top ``height`` px (default: the viewport)."""
        params: dict[str, Any] = {"format": "png"}
        if height is not None:
            width = self.evaluate("document.documentElement.clientWidth")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        data = self.send("Page.captureScreenshot", params)["data"]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(base64.b64decode(data))

    def problems(self, allow: tuple[str, ...] = ()) -> list[str]:
        """Console errors, uncaught exceptions and non-local requests seen so far (``allow``: URL prefixes that
        count as local too, e.g. a server of the test's own on 127.0.0.1)."""
        out = []
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')} {p['exceptionDetails'].get('exception', {}).get('description', '')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif m == "Network.requestWillBeSent" and not p["request"]["url"].startswith((*LOCAL_SCHEMES, *allow)):
                out.append(f"network request: {p['request']['url']}")
        return out

    def close(self) -> None:
        """Close the browser and make sure the process this object started is gone (by its PID)."""
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                self._id += 1
                ws.send(json.dumps({"id": self._id, "method": "Browser.close"}))
            except Exception:  # already gone
                pass
        self._stack.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
