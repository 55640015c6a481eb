"""One sweep per experiment id, and resume after ``kill -9`` (issue 18), through the CLI.

A second sweep on an id that is being run is refused (exit 2, naming the holder's pid) without writing
anything; after the first is killed with SIGKILL, the next invocation takes the lock and resumes. The
crash-resume property: killed at random moments, resumed, no finished run is redone and the summaries equal
an uninterrupted sweep's apart from wall-clock columns.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mas.test_sweep import comparable_results, comparable_summary, file_states

ROOT = Path(__file__).resolve().parents[2]


def config(tmp_path: Path, latency_ms: int) -> Path:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'concurrency = 2\n[models.default]\nprovider = "scripted"\nmodel = "scripted"\n'
                   f"scripted_latency_ms = {latency_ms}\n")
    return cfg


def cli(tmp_path: Path, cfg: Path, exp: str, *, tasks: int = 3, runs: int = 2) -> list[str]:
    return [sys.executable, str(ROOT / "main.py"), "run", "--config", str(cfg), "--benchmark", "arith",
            "--task-limit", str(tasks), "--runs-per-task", str(runs), "--systems", "sas,debate",
            "--output-root", str(tmp_path), "--experiment-id", exp, "--progress", "log"]


def finished(root: Path) -> set[Path]:
    return set(root.rglob("run_*.result.json"))


def files_of(root: Path, results: set[Path]) -> dict[str, tuple[int, str]]:
    """(mtime, sha256) of every file of the runs whose ``result.json`` files are ``results``."""
    prefixes = tuple(str(p.relative_to(root)).removesuffix("result.json") for p in results)
    return {k: v for k, v in file_states(root).items() if k.startswith(prefixes)} if prefixes else {}


def wait_for(cond, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_second_sweep_on_the_same_id_is_refused_and_a_killed_one_resumes(tmp_path):
    cfg = config(tmp_path, latency_ms=300)
    # 300 ms a call: the sweep must outlast the start-up of a second process on a loaded machine (runs got faster)
    root = tmp_path / "e"
    first = subprocess.Popen(cli(tmp_path, cfg, "e"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        wait_for(lambda: len(finished(root)) >= 1)
        second = subprocess.run(cli(tmp_path, cfg, "e"), cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)
        assert second.returncode == 2, second.stderr
        [line] = [ln for ln in second.stderr.splitlines() if ln.startswith("error:")]
        assert f"pid {first.pid}" in line and "another sweep" in line
        manifest = json.loads((root / "manifest.json").read_text())
        assert [inv["pid"] for inv in manifest["invocations"]] == [first.pid]  # the refused one wrote nothing
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        first.kill()
        first.communicate()
    done_before = finished(root)
    kept = files_of(root, done_before)
    third = subprocess.run(cli(tmp_path, cfg, "e"), cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)
    assert third.returncode == 0, third.stderr[-3000:]
    after = file_states(root)
    assert kept and all(after[k] == v for k, v in kept.items()), "a finished run was redone"
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["counts"]["finished"] == 12
    assert manifest["invocations"][-1]["skipped"] == len(done_before)
    # the killed invocation is no longer "running" for ever: the one that took its lock says it crashed
    assert [inv["status"] for inv in manifest["invocations"]] == ["crashed", "finished"]


@pytest.mark.slow
def test_kill_9_at_five_random_moments_then_resume_equals_an_uninterrupted_sweep(tmp_path):
    cfg = config(tmp_path, latency_ms=120)
    root = tmp_path / "killed"
    rng = random.Random(18)
    kept: dict[str, tuple[int, str]] = {}
    progress = []
    for kill in range(5):
        proc = subprocess.Popen(cli(tmp_path, cfg, "killed"), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # A random moment mid-sweep: after a random number of further runs finished, plus a random delay
        # (so the kill lands anywhere in the runs in flight, their file writes included).
        target = min(11, (len(finished(root)) if root.exists() else 0) + rng.randint(1, 2))
        wait_for(lambda p=proc, t=target: root.exists() and len(finished(root)) >= t or p.poll() is not None, 300)
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        states = file_states(root) if root.exists() else {}
        assert all(states.get(k) == v for k, v in kept.items()), f"kill {kill}: a finished run was touched"
        kept.update(files_of(root, finished(root)) if root.exists() else {})
        progress.append(len(finished(root)) if root.exists() else 0)
    print(f"finished runs after each kill -9: {progress} of 12")
    assert all(0 < n < 12 for n in progress), f"a kill missed the sweep: finished runs after each kill {progress}"
    resumed = subprocess.run(cli(tmp_path, cfg, "killed"), cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = subprocess.run(cli(tmp_path, cfg, "whole"), cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)
    assert whole.returncode == 0, whole.stderr[-3000:]
    after = file_states(root)
    assert all(after[k] == v for k, v in kept.items()), "a finished run was redone"
    assert comparable_results(root) == comparable_results(tmp_path / "whole")
    assert comparable_summary(root) == comparable_summary(tmp_path / "whole")
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["counts"]["finished"] == 12


def _user_namespaces() -> bool:
    try:
        return subprocess.run(["unshare", "-r", "-m", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _user_namespaces(), reason="needs unprivileged user and mount namespaces (unshare -r -m)")
def test_a_full_disk_stops_the_sweep_in_one_line_and_the_same_command_finishes_it(tmp_path):
    """The sweep writes to a 600 kB tmpfs (in a user namespace), which fills after a few runs; then the tmpfs
    grows and the same command resumes. Copies of the tree after each step are compared outside."""
    cfg = config(tmp_path, latency_ms=0)
    disk, full, resumed = tmp_path / "disk", tmp_path / "after_full", tmp_path / "resumed"
    disk.mkdir()
    sweep = " ".join(cli(disk, cfg, "e"))
    script = (f"mount -t tmpfs -o size=600k tmpfs {disk} && cd {ROOT} && "
              f"{{ {sweep} >{tmp_path}/first.out 2>{tmp_path}/first.err; echo $? >{tmp_path}/first.rc; }}; "
              f"cp -a {disk}/e {full} && mount -o remount,size=64m {disk} && "
              f"{{ {sweep} >{tmp_path}/second.out 2>{tmp_path}/second.err; echo $? >{tmp_path}/second.rc; }}; "
              f"cp -a {disk}/e {resumed}")
    subprocess.run(["unshare", "-r", "-m", "sh", "-c", script], check=True, timeout=900)
    err = (tmp_path / "first.err").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "2", err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    (last,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "No space left on device" in last and "runs finished under" in last, last
    assert 0 < len(finished(full)) < 12, "the disk filled before any run finished, or never"
    second_err = (tmp_path / "second.err").read_text()
    assert (tmp_path / "second.rc").read_text().strip() == "0", second_err[-3000:]
    kept = files_of(full, finished(full))
    after = file_states(resumed)
    assert all(after[k] == v for k, v in kept.items()), "a run finished before the disk filled was redone"
    whole = subprocess.run(cli(tmp_path, cfg, "whole"), cwd=ROOT, capture_output=True, text=True, check=False,
                           timeout=900)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert comparable_results(resumed) == comparable_results(tmp_path / "whole")
    assert comparable_summary(resumed) == comparable_summary(tmp_path / "whole")
