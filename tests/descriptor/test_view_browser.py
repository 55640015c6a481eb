"""``view`` in a real headless Chromium while a sweep runs: the open report reloads itself and shows runs as they
finish, the run viewer draws a transcript over HTTP, and nothing is fetched from anywhere but the viewer.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped when no Chromium is on PATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import stop_group
from tests.scripts_loader import load_script

pytestmark = [pytest.mark.browser, pytest.mark.slow]
cdp = load_script("chromium_cdp")
ROOT = Path(__file__).resolve().parents[2]
TASKS = 6


@pytest.fixture()
def browser(tmp_path):
    if cdp.find_chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    with cdp.Chromium(tmp_path / "profile", width=1280, height=1000) as b:
        yield b


def start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def page_value(browser, expression: str):
    """``expression`` in the page, or None while the page is between two loads (it reloads itself)."""
    try:
        return browser.evaluate(expression)
    except RuntimeError:
        return None


def finished(root: Path) -> int:
    return len(list(root.rglob("run_0.result.json")))


RUNS = "(() => { const f = document.querySelector('p.facts'); return f ? parseInt(f.textContent) : null; })()"


def test_view_shows_a_running_sweeps_runs_as_they_finish(tmp_path, browser):
    root = tmp_path / "artifacts"
    sweep = start("run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--task-limit",
                  str(TASKS), "--concurrency", "1", "--set", "models.default.scripted_latency_ms=700",
                  "--output-root", str(root), "--experiment-id", "live", "--progress", "none")
    view = start("view", str(root), "--port", "0", "--interval", "0.5")
    try:
        said = ""
        while (found := re.search(r"http://127\.0\.0\.1:\d+/", said)) is None:
            line = view.stdout.readline()
            assert line, f"view ended: {said}"
            said += line
        base = found.group(0)
        deadline = time.monotonic() + 300
        while finished(root / "live") < 1:
            assert sweep.poll() is None and time.monotonic() < deadline, "the sweep ended before its first run"
            time.sleep(0.2)
        browser.open(f"{base}live/")
        first = None
        while first is None and time.monotonic() < deadline:
            first = page_value(browser, RUNS)
            time.sleep(0.2)
        assert first is not None and 1 <= first < TASKS, first
        # the page is not reloaded by the test: it reloads itself when the viewer has rebuilt the report
        seen, during = first, False
        while seen < TASKS and time.monotonic() < deadline:
            now = page_value(browser, RUNS)
            if now is not None and now > seen:
                during = during or sweep.poll() is None  # more runs shown while the sweep still ran
                seen = now
            time.sleep(0.2)
        assert seen == TASKS and during, (seen, during)
        assert sweep.wait(timeout=120) == 0
        assert browser.evaluate("location.pathname") == "/live/.view/report/index.html"
        # the experiment's run viewer, over HTTP: a transcript drawn from its data file
        browser.open(f"{base}live/.view/report/run.html#arith/sas/arith_0_0000/run_0")
        ready = None
        while ready is None and time.monotonic() < deadline:
            ready = page_value(browser, "document.body.dataset.ready") or None
            time.sleep(0.2)
        assert ready == "1", page_value(browser, "document.getElementById('status').textContent")
        assert page_value(browser, "document.querySelectorAll('#events > li').length") > 3
        browser.open(base)  # the root's list of experiments
        assert "finished" in page_value(browser, "document.querySelector('td.status').textContent")
        assert browser.problems(allow=(base,)) == []  # no error, nothing fetched from anywhere but the viewer
    finally:
        stop_group(sweep, timeout_s=10)
        stop_group(view, timeout_s=10)
