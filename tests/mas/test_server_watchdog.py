"""The embedded server stops when the run using it dies without releasing it (SIGKILL, SIGHUP): its watchdog."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mas.serving.catalogue import CachePaths
from mas.serving.process import ServerRecord, pid_alive, read_record, register_user, write_record
from mas.serving.watchdog import release_for


@pytest.fixture
def server(tmp_path):
    """A stand-in llama-server (a sleeping process whose command line names it) recorded under a cache."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "llama-server"],
                            start_new_session=True)
    paths = CachePaths(root=tmp_path / "cache")
    paths.run_dir.mkdir(parents=True)
    for _ in range(100):  # its command line is readable once the interpreter is up
        if pid_alive(proc.pid):
            break
        time.sleep(0.02)
    write_record(paths, ServerRecord(pid=proc.pid, host="127.0.0.1", port=1, base_url="http://127.0.0.1:1/v1",
                                     model="m", model_path="m.gguf", started_at="", ctx_size=8, parallel=1,
                                     threads=1, log_path=str(tmp_path / "log")))
    yield paths, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_release_for_a_dead_user_stops_the_server_unless_persistent_or_still_used(server):
    paths, proc = server
    user = dead_pid()
    register_user(paths, user)
    register_user(paths, os.getpid())  # another live user
    assert release_for(paths, user) is False and proc.poll() is None
    (paths.run_dir / "users" / str(os.getpid())).unlink()
    rec = read_record(paths)
    write_record(paths, rec.model_copy(update={"persistent": True}))  # `model serve`: no run stops it
    assert release_for(paths, user) is False and proc.poll() is None
    write_record(paths, rec)
    assert release_for(paths, user) is True
    assert proc.wait(timeout=10) is not None and read_record(paths) is None


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_a_user_killed_without_its_exit_handlers_leaves_no_server_behind(server, sig):
    """The sweep's own atexit release never runs on SIGKILL or SIGHUP: the server (~850 MB) stayed up."""
    paths, proc = server
    user = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from mas.serving.catalogue import CachePaths
        from mas.serving.process import register_user
        from mas.serving.watchdog import start_watchdog
        paths = CachePaths(root=Path({str(paths.root)!r}))
        register_user(paths, os.getpid())
        start_watchdog(paths, os.getpid())
        print("ready", flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    assert user.stdout.readline().strip() == b"ready"
    user.send_signal(sig)
    user.wait(timeout=10)
    assert proc.wait(timeout=15) is not None  # stopped by the watchdog, by PID
    deadline = time.monotonic() + 10
    while read_record(paths) is not None and time.monotonic() < deadline:  # it clears the record just after
        time.sleep(0.05)
    assert read_record(paths) is None


def test_after_a_clean_release_the_watchdog_leaves_a_server_another_run_uses(server):
    paths, proc = server
    from mas.serving.watchdog import start_watchdog

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # another run using it
    try:
        register_user(paths, other.pid)
        user = dead_pid()
        register_user(paths, user)
        dog = start_watchdog(paths, user)
        dog.stdin.close()  # as ServerHandle.release does once this process is done with the server
        assert dog.wait(timeout=10) == 0 and proc.poll() is None and read_record(paths) is not None
    finally:
        other.kill()
        other.wait()
