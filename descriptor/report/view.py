"""``view``: the experiments under an output root, served on 127.0.0.1 and kept up to date while sweeps run.

``mas-econ view [OUTPUT_ROOT] [--port N]`` serves, on the loopback interface only:

- ``/``: the experiments under the root (each directory holding runs or a manifest), with their status (the
  manifest's) and finished runs;
- ``/<experiment>/``: that experiment's report, the one ``report`` writes, built into the experiment's
  ``.view/report/`` (hidden, beside the runs, so its links to run files and pictures hold; the sweep's own
  ``report/`` is never touched) whenever the runs are newer than it, at most once per ``interval`` seconds and
  only while a page of it is open; the index, the grid pages and the run viewer (``run.html#<run>``) with every
  run's transcript;
- the run files themselves (``/<experiment>/<benchmark>/<system>/<task>/run_<r>.*``), which the report links.

An open page asks the server every ``interval`` seconds whether its report changed (a script tag loading
``/_view/state.js``: the report's Content-Security-Policy allows only scripts from its own origin and no fetch)
and reloads when it did, so runs appear as they finish. Nothing is sent anywhere: the server binds 127.0.0.1,
answers only requests addressed to it by that name (a page elsewhere cannot reach it through DNS rebinding), and
the pages load nothing but its own files.
"""

from __future__ import annotations

import hashlib
import html
import json
import mimetypes
import os
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from descriptor.errors import UserError
from descriptor.layout import MANIFEST_NAME, find_task_dirs

VIEW_DIR = ".view"
"""The viewer's copy of an experiment's report: ``<experiment>/.view/report/``."""
DEFAULT_PORT = 7577
DEFAULT_INTERVAL_S = 2.0
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'")

LIVE_JS = """(function () {
  "use strict";
  var me = document.currentScript, exp = me.dataset.exp, version = me.dataset.version;
  window.masViewState = function (v) { if (v !== version) { location.reload(); } };
  setInterval(function () {
    var s = document.createElement("script");
    s.src = "/_view/state.js?e=" + encodeURIComponent(exp) + "&t=" + Date.now();
    s.onload = s.onerror = function () { s.remove(); };
    document.head.appendChild(s);
  }, %d);
})();
"""


@dataclass(kw_only=True, slots=True)
class _Report:
    """What the viewer knows of one experiment's live report."""

    stamp: tuple[int, int] | None = None
    """(task directories, newest mtime among them and the manifest, ns) when the report was last built."""
    built_at: float = 0.0
    """time.monotonic() of the last build's start."""
    error: str | None = None
    """Why the last build wrote no report (no finished run yet, a damaged file)."""
    building: bool = False


@dataclass(kw_only=True)
class Viewer:
    """The experiments under ``root`` and their live reports (shared by the server's threads)."""

    root: Path
    interval_s: float = DEFAULT_INTERVAL_S
    _reports: dict[str, _Report] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _build_lock: threading.Lock = field(default_factory=threading.Lock)  # write_report is not re-entrant

    def experiment(self, name: str) -> Path | None:
        """The experiment directory called ``name`` under the root, or None."""
        if not name or name.startswith(".") or "/" in name or name != Path(name).name:
            return None
        path = self.root / name
        return path if path.is_dir() and _is_experiment(path) else None

    def experiments(self) -> list[dict[str, object]]:
        """Each experiment under the root: name, status, finished runs, newest change (UTC text)."""
        out: list[dict[str, object]] = []
        if not self.root.is_dir():  # not made yet: the first sweep makes it
            return out
        for path in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if not _is_experiment(path):
                continue
            dirs, newest = _stamp(path)
            manifest = _read_json(path / MANIFEST_NAME)
            finished = sum(1 for d in find_task_dirs(path) for f in os.listdir(d) if f.endswith(".result.json")
                           and f.startswith("run_") and ".rollback_" not in f)
            out.append({"name": path.name, "status": manifest.get("status", "?") if manifest else "no manifest",
                        "runs": finished, "tasks": dirs,
                        "updated": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(newest / 1e9)) if newest else ""})
        return out

    def index_version(self) -> str:
        """A digest of the root's listing: it changes when a run finishes in any experiment."""
        return hashlib.sha256(json.dumps(self.experiments()).encode()).hexdigest()[:16]

    def refresh(self, name: str, *, wait: bool = False) -> str:
        """The version of experiment ``name``'s live report, starting a rebuild first when its runs are newer (in
        the background, or here when ``wait`` or no report exists yet)."""
        path = self.root / name
        out = path / VIEW_DIR / "report"
        with self._lock:
            state = self._reports.setdefault(name, _Report())
            stamp = _stamp(path)
            if state.stamp is None and (marker := _marker(out)) is not None and marker >= stamp[1]:
                state.stamp = stamp  # a report this viewer (or an earlier one) built after the last change
            due = (stamp != state.stamp and not state.building
                   and time.monotonic() - state.built_at >= self.interval_s)
            if due:
                state.building, state.built_at = True, time.monotonic()
        if due:
            if wait or _marker(out) is None:
                self._build(name, stamp)
            else:
                threading.Thread(target=self._build, args=(name, stamp), daemon=True, name=f"view-{name}").start()
        return self.version(name)

    def version(self, name: str) -> str:
        """What an open page compares: the live report's write time, or (none written yet) why not."""
        marker = _marker(self.root / name / VIEW_DIR / "report")
        state = self._reports.get(name)
        return f"{marker}" if marker is not None else f"none:{(state.error if state else None) or ''}"[:200]

    def _build(self, name: str, stamp: tuple[int, int]) -> None:
        from descriptor.report.build import write_report

        error: str | None = None
        try:
            with self._build_lock:
                write_report(self.root / name, out=self.root / name / VIEW_DIR / "report")
        except UserError as err:  # no finished run yet, a damaged file: said on the page, tried again later
            error = str(err).splitlines()[0]
        except Exception as err:  # the page says so; the server goes on serving the other experiments
            error = f"{type(err).__name__}: {err}".splitlines()[0]
        with self._lock:
            state = self._reports[name]
            state.building, state.error = False, error
            state.stamp = stamp


def _is_experiment(path: Path) -> bool:
    return (path / MANIFEST_NAME).is_file() or bool(find_task_dirs(path))


def _stamp(path: Path) -> tuple[int, int]:
    """(task directories, the newest mtime of them, their parents and the manifest, ns): what a finished run
    changes (its result file is renamed into its task directory)."""
    dirs = find_task_dirs(path)
    times = [d.stat().st_mtime_ns for d in dirs] + [d.parent.stat().st_mtime_ns for d in {d.parent for d in dirs}]
    manifest = path / MANIFEST_NAME
    if manifest.is_file():
        times.append(manifest.stat().st_mtime_ns)
    return len(dirs), max(times, default=0)


def _marker(report: Path) -> int | None:
    from descriptor.report.render import MARKER

    try:
        return (report / MARKER).stat().st_mtime_ns
    except OSError:
        return None


def _read_json(path: Path) -> dict[str, object] | None:
    from descriptor.untrusted import BadJson, parse_json

    try:
        data = parse_json(path.read_bytes())
    except (OSError, BadJson):
        return None
    return data if isinstance(data, dict) else None


def live_tag(experiment: str, version: str) -> str:
    """The script tag that reloads a page when its experiment's report (or, for ``""``, the root's listing)
    changes."""
    return (f'<script src="/_view/live.js" data-exp="{html.escape(experiment)}" '
            f'data-version="{html.escape(version)}"></script>')


def _page(title: str, body: str, experiment: str, version: str) -> bytes:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            '<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:.2em .8em;text-align:left}'
            f'</style></head><body>{body}{live_tag(experiment, version)}</body></html>').encode()


class _Handler(BaseHTTPRequestHandler):
    viewer: Viewer
    server_version = "mas-econ-view"

    def log_message(self, *args: object) -> None:  # quiet: the command prints its address once
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if not self._host_ok():
            return self._send(HTTPStatus.FORBIDDEN, b"forbidden: address this server as 127.0.0.1\n", "text/plain")
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path == "/":
            return self._index()
        if path == "/favicon.ico":  # what a browser asks for on its own: nothing to show
            return self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        if path == "/_view/live.js":
            return self._send(HTTPStatus.OK, (LIVE_JS % int(self.viewer.interval_s * 1000)).encode(),
                              "text/javascript")
        if path == "/_view/state.js":
            name = (parse_qs(url.query).get("e") or [""])[0]
            if name and self.viewer.experiment(name) is None:
                return self._send(HTTPStatus.NOT_FOUND, b"", "text/javascript")
            version = self.viewer.refresh(name) if name else self.viewer.index_version()
            return self._send(HTTPStatus.OK, f"masViewState({json.dumps(version)});".encode(), "text/javascript")
        parts = path.strip("/").split("/")
        name = parts[0]
        if self.viewer.experiment(name) is None:
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        if len(parts) == 1:
            return self._experiment(name)
        self._file(name, parts[1:])

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").lower()
        port = self.server.server_address[1]
        return host in (f"127.0.0.1:{port}", f"localhost:{port}")

    def _index(self) -> None:
        rows = "".join(
            f'<tr><td><a href="/{quote(str(e["name"]))}/">{html.escape(str(e["name"]))}</a></td>'
            f'<td class="status">{html.escape(str(e["status"]))}</td><td class="runs">{e["runs"]}</td>'
            f'<td>{e["tasks"]}</td><td>{html.escape(str(e["updated"]))}</td></tr>'
            for e in self.viewer.experiments())
        body = (f"<h1>Experiments under {html.escape(str(self.viewer.root))}</h1>"
                + (f"<table><thead><tr><th>experiment</th><th>status</th><th>finished runs</th><th>task "
                   f"directories</th><th>last change (UTC)</th></tr></thead><tbody>{rows}</tbody></table>"
                   if rows else "<p>No experiment here yet; this page shows them as sweeps start.</p>"))
        self._send(HTTPStatus.OK, _page("mas-econ view", body, "", self.viewer.index_version()), "text/html")

    def _experiment(self, name: str) -> None:
        version = self.viewer.refresh(name)
        if not version.startswith("none:"):
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", f"/{quote(name)}/{VIEW_DIR}/report/index.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        said = version.removeprefix("none:") or "the report is being written"
        body = (f'<h1>{html.escape(name)}</h1><p class="waiting">No report yet: {html.escape(said)}. This page '
                'reloads when the first run finishes.</p><p><a href="/">all experiments</a></p>')
        self._send(HTTPStatus.OK, _page(name, body, name, version), "text/html")

    def _file(self, name: str, parts: list[str]) -> None:
        base = (self.viewer.root / name).resolve()
        if any(p.startswith(".") and (i, p) != (0, VIEW_DIR) for i, p in enumerate(parts)):
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        target = base.joinpath(*parts).resolve()
        for _ in range(20 if parts[0] == VIEW_DIR else 1):  # a rebuilt report takes its place by two renames
            if target.is_file():
                break
            time.sleep(0.05)
        if not target.is_relative_to(base) or not target.is_file():
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        data = target.read_bytes()
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if target.name.endswith((".jsonl", ".mmd", ".md")):
            kind = "text/plain"
        if kind == "text/html" and parts[0] == VIEW_DIR:  # the live report's pages reload as runs finish
            tag = live_tag(name, self.viewer.version(name)).encode()
            data = data.replace(b"</body>", tag + b"</body>", 1) if b"</body>" in data else data + tag
        self._send(HTTPStatus.OK, data, kind)

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8" if kind.startswith("text/") else kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def make_server(root: str | Path, *, port: int = DEFAULT_PORT,
                interval_s: float = DEFAULT_INTERVAL_S) -> ThreadingHTTPServer:
    """The viewer's HTTP server on 127.0.0.1:``port`` (0: a free port), not yet serving. :class:`UserError` when
    the root is no directory or the port is taken."""
    path = Path(root)
    if path.exists() and not path.is_dir():  # one not made yet is shown as the sweeps make it
        raise UserError(f"view: {path}: not a directory (expected an output root holding experiments)")
    if interval_s <= 0:
        raise UserError(f"view: --interval: expected a positive number of seconds, got {interval_s}")
    handler = type("ViewHandler", (_Handler,), {"viewer": Viewer(root=path.absolute(), interval_s=interval_s)})
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as err:
        raise UserError(f"view: --port {port}: cannot listen on 127.0.0.1:{port} ({err.strerror}); "
                        "give another port, or --port 0 for a free one") from None
    server.daemon_threads = True
    return server
