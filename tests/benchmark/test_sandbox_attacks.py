"""Issue 18's attacks on the evaluation sandbox, as a model would write them, against the default isolation.

Each test is an attack that must not reach the host: the sweep's environment, the sweep process itself, files
outside the sandbox, the network, the machine's process and memory budget, or the time after the sandbox's
parent died. Where an attack could hurt the test process if it succeeded, a helper process stands in for the
sweep.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from benchmark.sandbox import run_python

ROOT = Path(__file__).resolve().parents[2]


def processes_with(marker: bytes) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds ``marker``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker in (d / "cmdline").read_bytes() and " Z " not in (d / "stat").read_text():
                found.append(int(d.name))
        except OSError:
            pass
    return found


def wait_until(cond, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _sandbox_dirs() -> set[str]:
    return {d for d in os.listdir(tempfile.gettempdir()) if d.startswith("mas-sandbox-")}


def test_parent_environment_is_unreadable() -> None:
    key = f"planted-{uuid.uuid4().hex}"
    # /proc/<pid>/environ shows the environment a process was started with: the key is in the helper's.
    code = textwrap.dedent("""
        import os
        for path in ("/proc/%d/environ" % os.getppid(), "/proc/{parent}/environ"):
            try:
                print(open(path, "rb").read())
            except OSError as err:
                print("refused", path, err)
        for pid in os.listdir("/proc"):
            try:
                print(open("/proc/%s/environ" % pid, "rb").read())
            except OSError:
                pass
        print(os.environ.get("MY_LLM_CRED"))
    """)
    proc = _run_in_helper(code, timeout_s=10, env={"MY_LLM_CRED": key})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "survived 0" in out, (out, err)
    assert key not in out and key not in err


def test_host_files_are_invisible(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do-not-read")
    r = run_python(f"print(open({str(secret)!r}).read())")
    assert "do-not-read" not in r.stdout


def _run_in_helper(code: str, *, timeout_s: float, memory_mb: int = 512,
                   env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A helper process standing in for the sweep: it runs ``code`` (``{parent}`` = its pid) in the sandbox
    and prints what the code printed, then ``survived <exit code>``."""
    helper = textwrap.dedent(f"""
        import os, sys
        from benchmark.sandbox import run_python
        code = sys.stdin.read().replace("{{parent}}", str(os.getpid()))
        r = run_python(code, timeout_s={timeout_s}, memory_mb={memory_mb})
        print(r.stdout, r.stderr)
        print("survived", r.exit_code, flush=True)
    """)
    code_file = Path(tempfile.mkstemp(prefix="attack-", suffix=".py")[1])
    code_file.write_text(code)
    with code_file.open() as stdin:
        proc = subprocess.Popen([sys.executable, "-c", helper], cwd=ROOT, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    code_file.unlink()
    return proc


def test_pidfd_kill_cannot_reach_the_sweep() -> None:
    attack = textwrap.dedent("""
        import os, signal
        for pid in (os.getppid(), {parent}):
            try:
                signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGKILL)
            except OSError as err:
                print("refused", pid, err)
    """)
    proc = _run_in_helper(attack, timeout_s=10)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "survived" in out, (proc.returncode, out, err)


@pytest.mark.parametrize("how", ["open", "os.open", "sqlite3", "sqlite3-uri", "patched-builtins"])
def test_writes_outside_the_sandbox_do_not_land(tmp_path: Path, how: str) -> None:
    targets = [tmp_path / f"x_{uuid.uuid4().hex}", Path(tempfile.gettempdir()) / f"x_{uuid.uuid4().hex}"]
    lines = []
    for t in map(str, targets):
        lines.append({
            "open": f"open({t!r}, 'w').write('x')",
            "os.open": f"import os; os.close(os.open({t!r}, os.O_CREAT | os.O_WRONLY))",
            "sqlite3": f"import sqlite3; c = sqlite3.connect({t!r}); c.execute('create table t(x)'); c.commit()",
            "sqlite3-uri": (f"import sqlite3; c = sqlite3.connect('file:' + {t!r} + '?mode=rwc', uri=True); "
                            "c.execute('create table t(x)'); c.commit()"),
            "patched-builtins": ("import builtins; builtins.isinstance = lambda *a: True; "
                                 f"builtins.any = lambda *a: False; open({t!r}, 'w').write('x')"),
        }[how])
    for line in lines:
        run_python(line)
    try:
        assert not [t for t in targets if t.exists()]
    finally:
        for t in targets:
            t.unlink(missing_ok=True)


def test_fork_bomb_stays_within_limits() -> None:
    marker_mb = 200 + int(uuid.uuid4().hex[:3], 16)
    bomb = textwrap.dedent("""
        import os, threading, time
        def spawn():
            while True:
                try:
                    os.fork()
                except Exception:
                    try:
                        threading.Thread(target=time.sleep, args=(60,)).start()
                    except Exception:
                        time.sleep(0.01)
        spawn()
    """)
    t0 = time.monotonic()
    r = run_python(bomb, timeout_s=2, memory_mb=marker_mb)
    assert not r.ok and time.monotonic() - t0 < 15
    assert wait_until(lambda: not processes_with(str(marker_mb * 2**20).encode()), 5)


def test_memory_bomb_stays_within_limits() -> None:
    r = run_python("x = []\nwhile True:\n    x.append(bytearray(10**7))", timeout_s=10, memory_mb=128)
    assert not r.ok and r.limit == "memory" and not r.timed_out


def test_no_orphans_or_temp_dirs_after_the_parent_is_killed() -> None:
    memory_mb = 300 + int(uuid.uuid4().hex[:3], 16)  # appears in the sandbox's command line: finds our child
    marker = str(memory_mb * 2**20).encode()
    dirs_before = _sandbox_dirs()
    proc = _run_in_helper("import time\ntime.sleep(60)", timeout_s=120, memory_mb=memory_mb)
    try:
        assert wait_until(lambda: bool(processes_with(marker)), 30), proc.stderr.read() if proc.stderr else ""
        time.sleep(0.3)  # let it get into its sleep
        proc.kill()
        proc.wait(timeout=30)
        assert wait_until(lambda: not processes_with(marker), 5), "sandboxed code outlived its parent"
        left = [d for d in _sandbox_dirs() - dirs_before if d.startswith(f"mas-sandbox-{proc.pid}-")]
        assert not left, "the killed parent's sandbox directory was left behind"
    finally:
        proc.kill()
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_network_is_unreachable() -> None:
    server = socket.create_server(("127.0.0.1", 0))  # listening: a connect would complete without an accept
    port = server.getsockname()[1]
    attack = textwrap.dedent(f"""
        import socket, urllib.request
        for attempt in (lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2),
                        lambda: urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=2)):
            try:
                attempt()
                print("connected")
            except Exception as err:
                print("refused", type(err).__name__)
    """)
    r = run_python(attack)
    server.setblocking(False)
    try:
        server.accept()
        reached = True
    except BlockingIOError:
        reached = False
    finally:
        server.close()
    assert "connected" not in r.stdout and not reached
