"""Issue 30: helper processes never outlive the command that started them, and a report killed while writing leaves
nothing the next report keeps.

``kill -9`` of ``summarize-experiment`` left its plot child and both pool workers running for good (~170 MB per
kill): each held the others' pipe ends open, so none saw its input close. A killed ``report`` left a
``.report.*.tmp`` directory beside the report that no later run removed.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.descriptor_fixtures import build_experiment

ROOT = Path(__file__).resolve().parents[2]


def children(pid: int) -> set[int]:
    """PIDs whose parent is ``pid`` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_summary_killed_with_sigkill_leaves_no_helper_process(tmp_path):
    root = build_experiment(tmp_path / "exp", tasks=120, runs=1)  # 240 task directories: workers are forked
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "summarize-experiment", "--experiment-root",
                             str(root)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    helpers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while len(helpers) < 3 and proc.poll() is None and time.monotonic() < deadline:
            helpers |= children(proc.pid)  # the plot child, then the pool's workers
            time.sleep(0.01)
        assert len(helpers) >= 3, f"saw {len(helpers)} helper(s) before the summary ended: no kill to test"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 20
        while any(alive(p) for p in helpers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in helpers if alive(p)]
        assert not left, f"helper process(es) {left} outlived their killed parent"
    finally:
        proc.kill()
        for pid in helpers:  # ours (children of our child): never leave them running
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_next_report_removes_the_stage_a_killed_report_left(tmp_path):
    root = build_experiment(tmp_path / "exp", tasks=1, runs=1)
    stale = Path(tempfile.mkdtemp(prefix=".report.", suffix=".tmp", dir=root))  # as a kill -9 leaves it
    (stale / "index.html").write_text("half")
    live = Path(tempfile.mkdtemp(prefix=".report.", suffix=".tmp", dir=root))  # a report still writing
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "report", "--experiment-root", str(root)], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (root / "report" / "index.html").is_file()
        assert not stale.exists() and live.is_dir()
        assert [p.name for p in root.glob(".report.*")] == [live.name]
    finally:
        os.close(fd)
