"""``view``: the experiments under an output root served on 127.0.0.1, their reports rebuilt as runs finish, and
nothing but the root's own files served, to the loopback name only. (The browser test: test_view_browser.py.)"""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from descriptor.report.view import VIEW_DIR, make_server
from main import main


def sweep(root: Path, tasks: int, exp: str = "e1") -> None:
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--task-limit", str(tasks),
                 "--output-root", str(root), "--experiment-id", exp, "--progress", "none"]) == 0


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[Path, int]]:
    root = tmp_path / "artifacts"
    root.mkdir()
    server = make_server(root, port=0, interval_s=0.05)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield root, server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def get(port: int, path: str, host: str | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Host": host or f"127.0.0.1:{port}"})
    res = conn.getresponse()
    body = res.read().decode("utf-8", "replace")
    conn.close()
    return res.status, {k.lower(): v for k, v in res.getheaders()}, body


def state(port: int, exp: str) -> str:
    status, _, body = get(port, f"/_view/state.js?e={exp}")
    assert status == 200
    return re.fullmatch(r'masViewState\("(.*)"\);', body).group(1)


def settled(port: int, exp: str, timeout_s: float = 60) -> str:
    """The report's version once no rebuild is due (the viewer rebuilds in the background)."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        version = state(port, exp)
        if version == last and not version.startswith("none:"):
            return version
        last = version
        time.sleep(0.3)
    raise AssertionError(f"the report of {exp} did not settle: {last}")


def runs_on_index(port: int, exp: str) -> int:
    _, _, body = get(port, f"/{exp}/{VIEW_DIR}/report/index.html")
    return int(re.search(r'<p class="facts">(\d+) runs', body).group(1))


def test_the_root_lists_experiments_and_each_report_follows_its_runs(served):
    root, port = served
    root.rmdir()  # not made yet: the sweep makes it
    status, _, body = get(port, "/")
    assert status == 200 and "No experiment here yet" in body and 'src="/_view/live.js"' in body
    sweep(root, 2)
    status, _, body = get(port, "/")
    assert re.search(r'<a href="/e1/">e1</a></td><td class="status">finished</td><td class="runs">2</td>', body)
    status, headers, _ = get(port, "/e1/")
    assert status == 302 and headers["location"] == f"/e1/{VIEW_DIR}/report/index.html"
    first = settled(port, "e1")
    assert runs_on_index(port, "e1") == 2
    _, headers, page = get(port, f"/e1/{VIEW_DIR}/report/index.html")
    assert f'<script src="/_view/live.js" data-exp="e1" data-version="{first}"></script></body>' in page
    assert "default-src 'none'" in headers["content-security-policy"] and headers["cache-control"] == "no-store"
    own = (root / "e1" / "report" / ".mas-report").stat().st_mtime_ns  # the sweep's own report, left alone
    sweep(root, 4)  # the same experiment, resumed with two more tasks
    own_after = (root / "e1" / "report" / ".mas-report").stat().st_mtime_ns
    second = settled(port, "e1")
    assert second != first and runs_on_index(port, "e1") == 4
    assert own != own_after and (root / "e1" / "report" / ".mas-report").stat().st_mtime_ns == own_after
    status, _, trace = get(port, "/e1/arith/sas/arith_0_0003/run_0.trace.jsonl")  # the run files the report links
    assert status == 200 and '"event_type"' in trace
    status, _, viewer = get(port, f"/e1/{VIEW_DIR}/report/run.html")
    assert status == 200 and "/_view/live.js" in viewer


def test_an_experiment_without_a_finished_run_waits_for_one(served):
    root, port = served
    (root / "e2" / "arith" / "sas" / "t1").mkdir(parents=True)
    (root / "e2" / "arith" / "sas" / "t1" / "run_0.trace.jsonl").write_text("")  # a run in progress
    status, _, body = get(port, "/e2/")
    assert status == 200 and "No report yet" in body and "no finished run found" in body
    assert 'data-exp="e2" data-version="none:' in body


@pytest.mark.parametrize("path", ["/e1/../../etc/passwd", "/e1/%2e%2e/%2e%2e/etc/passwd", "/e1/.sweep.lock",
                                  "/e1/configs/../../outside.txt", "/nope/", "/e1/link/secret.txt", "/../x"])
def test_nothing_outside_the_root_or_hidden_is_served(served, path):
    root, port = served
    sweep(root, 1)
    (root.parent / "outside.txt").write_text("secret")
    (root.parent / "secrets").mkdir()
    (root.parent / "secrets" / "secret.txt").write_text("secret")
    (root / "e1" / "link").symlink_to(root.parent / "secrets")
    status, _, body = get(port, path)
    assert status == 404 and "secret" not in body


def test_only_requests_addressed_to_the_loopback_name_are_answered(served):
    _, port = served
    assert get(port, "/", host="evil.example:80")[0] == 403
    assert get(port, "/", host=f"localhost:{port}")[0] == 200


def test_bad_root_and_taken_port_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["view", str(tmp_path / "file"), "--port", "0"]) == 2
    assert "not a directory" in capsys.readouterr().err
    server = make_server(tmp_path, port=0)
    try:
        assert main(["view", str(tmp_path), "--port", str(server.server_address[1])]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot listen on 127.0.0.1" in err and "--port 0" in err
    finally:
        server.server_close()
