"""The local executor's worker processes (``--workers N``): the same runs and files as one process, resume, a clean
stop, no process left behind; ``--workers auto``; the manifest's rewrites bounded in time."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from descriptor.errors import UserError
from descriptor.layout import MANIFEST_NAME
from mas.config import ExperimentConfig, ModelRoute, RateLimit
from mas.llm.meter import METER
from mas.sweep.experiment import run_experiment, sweep_workers
from tests.mas.test_sweep import comparable_results, file_states, request, scripted_cfg

ROOT = Path(__file__).resolve().parents[2]


async def test_worker_processes_write_the_runs_one_process_writes(tmp_path):
    cfg = scripted_cfg(tmp_path, concurrency=4, rate_limit=RateLimit(max_concurrent=4))
    before = METER.reading().calls_done
    split = await run_experiment(request(cfg, "w", tasks=3, runs=2, systems=("sas", "debate"), workers=2))
    assert METER.reading().calls_done == before  # no call was made in this process: the workers made them
    whole = await run_experiment(request(cfg, "one", tasks=3, runs=2, systems=("sas", "debate")))
    assert METER.reading().calls_done > before
    strip = {"wall_time_s", "latency_total_ms", "run_id"}
    assert [r.model_dump(exclude=strip) for r in split] == [r.model_dump(exclude=strip) for r in whole]
    assert comparable_results(tmp_path / "w") == comparable_results(tmp_path / "one")
    manifest = json.loads((tmp_path / "w" / MANIFEST_NAME).read_text())
    assert manifest["status"] == "finished" and manifest["counts"]["finished"] == 12


async def test_a_resumed_sweep_with_workers_redoes_only_the_unfinished_runs(tmp_path):
    cfg = scripted_cfg(tmp_path, concurrency=4)
    await run_experiment(request(cfg, tasks=3, runs=2, workers=2))
    root = tmp_path / "e"
    results = sorted(root.rglob("run_*.result.json"))
    gone = results[:2]
    for path in gone:  # as if the sweep had stopped before these two finished
        path.unlink()
    kept = {k: v for k, v in file_states(root).items() if not any(k.startswith(str(p.relative_to(root))
                                                                                .removesuffix("result.json"))
                                                                    for p in gone)}
    await run_experiment(request(cfg, tasks=3, runs=2, workers=2))
    after = file_states(root)
    assert all(after[k] == v for k, v in kept.items()), "a finished run was redone"
    assert all(p.exists() for p in gone)
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["invocations"][-1]["skipped"] == 4 and manifest["counts"]["finished"] == 6


async def test_a_run_that_crashes_in_a_worker_is_reported_and_redone_next_time(tmp_path):
    """An exception escaping a run in a worker process crosses to the sweep as that run's crash (its errno kept:
    a full disk stops the sweep); the other runs finish, and the next invocation redoes the crashed one."""
    from mas.sweep.experiment import plan_runs, validate_request

    cfg = scripted_cfg(tmp_path, concurrency=2)
    req = request(cfg, tasks=2, runs=1, workers=2)
    first = plan_runs(req, validate_request(req))[0]
    first.paths.task_dir.parent.mkdir(parents=True)
    first.paths.task_dir.write_text("a file where the run's directory goes")
    with pytest.raises(UserError, match=r"1 run\(s\) crashed .*FileExistsError: \[Errno 17\]"):
        await run_experiment(req)
    manifest = json.loads((tmp_path / "e" / MANIFEST_NAME).read_text())
    assert manifest["status"] == "crashed" and manifest["counts"]["finished"] == 1
    first.paths.task_dir.unlink()
    assert len(await run_experiment(request(cfg, tasks=2, runs=1, workers=2))) == 2


def _children(pid: int) -> set[int]:
    """PIDs of the live processes whose parent is ``pid``."""
    kids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and stat.rsplit(")", 1)[1].split()[0] != "Z":
                kids.add(int(entry.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def _sweep_cmd(tmp_path: Path) -> list[str]:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('concurrency = 4\n[models.default]\nprovider = "scripted"\nmodel = "scripted"\n'
                   "scripted_latency_ms = 300\n")
    return [sys.executable, str(ROOT / "main.py"), "run", "--config", str(cfg), "--benchmark", "arith",
            "--task-limit", "6", "--runs-per-task", "2", "--systems", "sas", "--output-root", str(tmp_path),
            "--experiment-id", "e", "--progress", "none", "--workers", "2"]


def _started(tmp_path: Path, proc: subprocess.Popen) -> set[int]:
    """The sweep's two worker processes, once it has finished a run."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        workers = _children(proc.pid)
        if len(workers) >= 2 and any((tmp_path / "e").rglob("run_*.result.json")):
            return workers
        time.sleep(0.05)
    raise AssertionError(f"the sweep did not start its workers (exit {proc.poll()})")


def _stop(tmp_path: Path, sig: int) -> tuple[int, str]:
    """Start a sweep with two workers, send it ``sig`` once a run has finished; its exit code and stderr, after
    checking that neither worker outlived it."""
    proc = subprocess.Popen(_sweep_cmd(tmp_path), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        workers = _started(tmp_path, proc)
        proc.send_signal(sig)
        code = proc.wait(timeout=120)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in workers), "a worker process outlived its sweep"
    finally:
        proc.kill()
        _, err = proc.communicate()
    return code, err


@pytest.mark.serial  # a sweep's worker processes on every core
def test_a_stopped_sweep_stops_its_workers_and_the_same_command_finishes_it(tmp_path):
    code, err = _stop(tmp_path, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err[-3000:]
    root = tmp_path / "e"
    assert json.loads((root / MANIFEST_NAME).read_text())["status"] == "interrupted"
    done = set(root.rglob("run_*.result.json"))
    kept = {k: v for k, v in file_states(root).items()
            if any(k.startswith(str(p.relative_to(root)).removesuffix("result.json")) for p in done)}
    rerun = subprocess.run(_sweep_cmd(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = file_states(root)
    assert kept and all(after[k] == v for k, v in kept.items()), "a finished run was redone"
    assert len(list(root.rglob("run_*.result.json"))) == 12


@pytest.mark.serial  # a sweep's worker processes on every core
def test_no_worker_process_outlives_a_killed_sweep(tmp_path):
    code, _ = _stop(tmp_path, signal.SIGKILL)
    assert code == -signal.SIGKILL


def test_workers_auto_takes_one_process_per_16_runs_in_flight_within_the_cores_and_limits(tmp_path):
    cores = len(os.sched_getaffinity(0))

    def auto(concurrency: int, **route: object) -> int:
        cfg = scripted_cfg(tmp_path, concurrency=concurrency, **route)
        return sweep_workers(request(cfg, workers="auto"))

    assert auto(4) == 1 and auto(15) == 1
    assert auto(64) == min(cores, 4) and auto(1000) == cores
    assert auto(64, rate_limit=RateLimit(max_concurrent=1)) == 1
    embedded = ExperimentConfig(output_root=str(tmp_path), concurrency=64,
                                models={"default": ModelRoute(provider="embedded")})
    assert sweep_workers(request(embedded, workers="auto")) == 1  # the local server needs the cores
    assert sweep_workers(request(scripted_cfg(tmp_path), workers=3)) == 3


async def test_manifest_rewrites_take_a_bounded_share_of_the_sweep():
    """A manifest that takes 30 ms to rewrite is rewritten at most once per 0.6 s, however often runs finish
    (each second's rewrite of a large sweep's manifest held its event loop a twentieth of the time)."""
    from mas.sweep.loop import SAVE_SHARE, _ThrottledSave

    saves = []

    class SlowStore:
        def save(self) -> None:
            saves.append(time.monotonic())
            time.sleep(0.03)

    saver = _ThrottledSave(SlowStore(), 0.0, lambda err: False)  # type: ignore[arg-type]
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.5:
        saver.request()
        await asyncio.sleep(0.005)
    if saver.handle is not None:
        saver.handle.cancel()
    assert 1 <= len(saves) <= 2 and SAVE_SHARE == 0.05


def test_workers_option_takes_auto_or_a_positive_count():
    import argparse

    from mas.sweep.options import workers_arg

    assert workers_arg("auto") == "auto" and workers_arg("3") == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"expected auto or an integer >= 1, got '{bad}'"):
            workers_arg(bad)
