"""scripts/full_experiment.sh end to end (scripted model), plus the sweep-integrity checks behind it:
a forwarded Ctrl-C before the sweep, result.json identity on resume, an unreachable dask scheduler."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import main
from mas.config import ExperimentConfig, ModelRoute
from descriptor.errors import UserError
from mas.sweep.experiment import (
    ExperimentRequest,
    plan_runs,
    run_experiment,
    validate_request,
)
from mas.sweep.manifest import MANIFEST_NAME
from mas.sweep.runner import finished_result
from tests.mas.test_sweep import comparable_summary, file_states, sigterm_after_finished

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "full_experiment.sh"
# The issue's command: TASK_LIMIT=2 RUNS_PER_TASK=2 BENCHMARKS=arith,gsm8k SYSTEMS=sas,debate MODEL=scripted
ISSUE_ENV = {"TASK_LIMIT": "2", "RUNS_PER_TASK": "2", "BENCHMARKS": "arith,gsm8k", "SYSTEMS": "sas,debate",
             "MODEL": "scripted"}
SCRIPT_VARS = ("TASK_LIMIT", "RUNS_PER_TASK", "BENCHMARKS", "SYSTEMS", "MODEL", "EXPERIMENT_ID", "OUTPUT_ROOT",
               "CONFIG", "CONCURRENCY", "EXECUTOR", "SCHEDULER_ADDRESS", "WORKERS", "PYTHON", "ROLLBACK",
               "CALIBRATION")


def script_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """The caller's environment without the script's own variables, plus ``env`` (outputs under tmp_path)."""
    base = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARS}
    return {**base, "PYTHON": sys.executable, "OUTPUT_ROOT": str(tmp_path / "out"), **env}


def run_script(tmp_path: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=script_env(tmp_path, **env),
                          capture_output=True, text=True, timeout=timeout)


def summary_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ---- the script --------------------------------------------------------------------------------

def test_issue_command_completes_and_writes_the_summary(tmp_path):
    proc = run_script(tmp_path, EXPERIMENT_ID="issue", **ISSUE_ENV)
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "out" / "issue"
    rows = summary_rows(root / "experiment_summary.csv")
    assert {(r["benchmark"], r["system"]) for r in rows} == {(b, s) for b in ("arith", "gsm8k")
                                                             for s in ("sas", "debate")}
    assert all(r["n_tasks"] == "2" and r["n_runs"] == "4" for r in rows)
    assert len(list(root.rglob("run_*.result.json"))) == 16
    assert json.loads((root / MANIFEST_NAME).read_text())["status"] == "finished"
    assert f"summary at {root}/experiment_summary.csv" in proc.stderr


def test_rollback_rolls_back_the_failed_runs_and_the_summary_shows_after(tmp_path):
    cfg = tmp_path / "inject.toml"
    cfg.write_text('[models.default]\nprovider = "scripted"\nmodel = "scripted"\n[inject]\nrate = 1.0\n')
    proc = run_script(tmp_path, EXPERIMENT_ID="rb", TASK_LIMIT="2", RUNS_PER_TASK="1", BENCHMARKS="arith",
                      SYSTEMS="sas", CONFIG=str(cfg), ROLLBACK="restart")
    assert proc.returncode == 0, proc.stderr
    row, = summary_rows(tmp_path / "out" / "rb" / "experiment_summary.csv")
    assert float(row["success_rate"]) == 0.0 and float(row["success_after_rollback"]) == 1.0
    assert row["rolled_back"] == "2"
    bad = run_script(tmp_path, EXPERIMENT_ID="rb2", TASK_LIMIT="1", BENCHMARKS="arith", SYSTEMS="sas",
                     MODEL="scripted", CALIBRATION="cal.json")
    assert bad.returncode == 2 and "CALIBRATION is used with ROLLBACK" in bad.stderr


def test_unknown_benchmark_fails_before_any_run(tmp_path):
    proc = run_script(tmp_path, EXPERIMENT_ID="bad", **{**ISSUE_ENV, "BENCHMARKS": "arith,nope"})
    assert proc.returncode == 2
    assert "unknown benchmark 'nope'" in proc.stderr and "arith" in proc.stderr  # names the known ones
    assert not (tmp_path / "out" / "bad").exists()


def test_missing_api_key_fails_before_any_run(tmp_path):
    config = tmp_path / "hosted.toml"
    config.write_text('[models.default]\nprovider = "scripted"\nmodel = "scripted"\n\n'
                      '[models.x]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
                      'api_key_env = "MAS_ECON_TEST_UNSET_KEY"\n')
    env = {**ISSUE_ENV, "BENCHMARKS": "arith", "MODEL": "x", "CONFIG": str(config)}
    os.environ.pop("MAS_ECON_TEST_UNSET_KEY", None)
    proc = run_script(tmp_path, EXPERIMENT_ID="hosted", **env)
    assert proc.returncode == 2
    assert "MAS_ECON_TEST_UNSET_KEY" in proc.stderr and "not set" in proc.stderr
    assert not (tmp_path / "out" / "hosted").exists()


@pytest.mark.parametrize(("var", "value"), [("TASK_LIMIT", "0"), ("RUNS_PER_TASK", "0"), ("TASK_LIMIT", "-1"),
                                            ("RUNS_PER_TASK", "two"), ("CONCURRENCY", "0"), ("WORKERS", "0")])
def test_counts_must_be_positive_integers(tmp_path, var, value):
    proc = run_script(tmp_path, EXPERIMENT_ID="counts", timeout=30, **{**ISSUE_ENV, var: value})
    assert proc.returncode == 2
    assert f"{var} must be a positive integer (got '{value}')" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_list_benchmarks(tmp_path):
    proc = run_script(tmp_path, "--list-benchmarks", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert {"arith", "gsm8k"} <= set(proc.stdout.split())


BLOCK_REASONING_GYM = """\
import sys


class _NotInstalled:  # as if the optional package reasoning-gym were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "reasoning_gym":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def test_default_benchmarks_are_those_installed_and_the_others_are_named(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_REASONING_GYM)
    env = {"TASK_LIMIT": "1", "RUNS_PER_TASK": "1", "SYSTEMS": "sas", "MODEL": "scripted", "EXPERIMENT_ID": "d",
           "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = run_script(tmp_path, timeout=600, **env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "full_experiment: skipping reasoning_gym: benchmark reasoning_gym needs the package reasoning-gym" in proc.stderr
    ran = {r["benchmark"] for r in summary_rows(tmp_path / "out" / "d" / "experiment_summary.csv")}
    assert ran == {"arith", "gsm8k", "humaneval", "mbpp", "scicode", "workbench"}


FAKE_PYTHON = """\
#!/usr/bin/env bash
# Stands in for the interpreter: exits {code} as soon as it gets SIGTERM.
sleep 30 >/dev/null 2>&1 &
trap 'kill $! 2>/dev/null; exit {code}' TERM
touch "{ready}"
wait
"""


@pytest.mark.parametrize("code", [5, 143])
def test_exit_status_is_the_childs_after_a_forwarded_signal(tmp_path, code):
    # The child exits right after the forwarded SIGTERM: the script reports its status, not the trap's 143.
    ready = tmp_path / "ready"
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_PYTHON.format(code=code, ready=ready))
    fake.chmod(0o755)
    proc = subprocess.Popen(["bash", str(SCRIPT)], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            env=script_env(tmp_path, **{**ISSUE_ENV, "PYTHON": str(fake)}))
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert ("stopped" if code > 128 else f"failed (exit {code})") in err


# ---- Ctrl-C before the sweep ----------------------------------------------------------------------

SLOW_VALIDATION = """\
import sys, time
import mas.sweep.experiment

def slow_validate(req):  # stands in for task loading / embedded server start-up (blocking code)
    print("validating", flush=True)
    time.sleep(60)

mas.sweep.experiment.validate_request = slow_validate
import main
sys.exit(main.main(sys.argv[1:]))
"""


def test_sigint_before_the_sweep_stops_a_background_job_at_once(tmp_path):
    # Started like `main.py ... &` from a script: SIGINT ignored on entry.
    args = ["run", "--benchmark", "arith", "--model", "scripted", "--output-root", str(tmp_path),
            "--experiment-id", "e", "--progress", "none"]
    proc = subprocess.Popen([sys.executable, "-c", SLOW_VALIDATION, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.stdout.readline().strip() == "validating"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err and time.monotonic() - t0 < 20  # the slow step sleeps 60 s
    assert not (tmp_path / "e").exists()


def test_main_restores_the_previous_sigint_handler():
    before = signal.getsignal(signal.SIGINT)
    assert main.main(["list-benchmarks"]) == 0
    assert signal.getsignal(signal.SIGINT) is before


# ---- result.json identity --------------------------------------------------------------------------

def scripted_request(tmp_path: Path, **kw: object) -> ExperimentRequest:
    cfg = ExperimentConfig(output_root=str(tmp_path), concurrency=2,
                           models={"default": ModelRoute(provider="scripted", model="scripted")})
    return ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=["sas"], task_limit=1, runs_per_task=2,
                             experiment_id="e", progress="none", **kw)


@pytest.mark.parametrize(("field", "value"), [("seed", 999), ("run_id", "other/arith/sas/x/run_0"),
                                              ("task_id", "arith_9"), ("system", "debate"), ("benchmark", "gsm8k")])
async def test_a_result_of_another_run_is_not_finished_and_is_redone(tmp_path, field, value):
    req = scripted_request(tmp_path)
    first = await run_experiment(req)
    specs = plan_runs(req, validate_request(req))
    assert all(finished_result(s) is not None for s in specs)
    victim, other = specs
    path = victim.paths.result
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    other_before = file_states(other.paths.task_dir)
    with capture_logs() as logs:
        assert finished_result(victim) is None
    assert any(e["event"].startswith("result.json belongs to another run") and field in e["differs"] for e in logs)
    again = await run_experiment(req)
    assert finished_result(victim) is not None and json.loads(path.read_text())[field] != value
    assert [r.model_dump(exclude={"wall_time_s", "latency_total_ms"}) for r in again] == \
           [r.model_dump(exclude={"wall_time_s", "latency_total_ms"}) for r in first]
    kept = {k: v for k, v in other_before.items() if k.startswith(f"run_{other.run_index}.")}
    assert kept and all(file_states(other.paths.task_dir)[k] == v for k, v in kept.items())


# ---- unreachable dask scheduler ---------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_dask_scheduler_is_a_user_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("mas.sweep.executors.SCHEDULER_CONNECT_TIMEOUT_S", 1.0)
    address = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match=r"could not connect to the dask scheduler at 'tcp://127\.0\.0\.1:\d+'"):
        asyncio.run(run_experiment(scripted_request(tmp_path, executor="dask", scheduler_address=address)))
    assert not (tmp_path / "e").exists()  # checked before the manifest or any run exists
    code = main.main(["run", "--benchmark", "arith", "--model", "scripted", "--output-root", str(tmp_path),
                      "--experiment-id", "cli", "--progress", "none", "--executor", "dask",
                      "--scheduler-address", address])
    err = capsys.readouterr().err
    assert code == 2 and "error: --scheduler-address: could not connect" in err and "Traceback" not in err


# ---- SIGTERM half-way, then resume --------------------------------------------------------------------

SLOW_SCRIPTED = textwrap.dedent("""\
    concurrency = 2
    [models.default]
    provider = "scripted"
    [models.scripted]
    provider = "scripted"
    model = "scripted"
    scripted_latency_ms = 40
""")


@pytest.mark.slow
def test_sigterm_half_way_then_resume_equals_an_uninterrupted_sweep(tmp_path):
    config = tmp_path / "slow.toml"
    config.write_text(SLOW_SCRIPTED)
    env = {**ISSUE_ENV, "CONFIG": str(config)}
    root = tmp_path / "out" / "killed"
    proc = subprocess.Popen(["bash", str(SCRIPT)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=script_env(tmp_path, EXPERIMENT_ID="killed", **env))
    err = sigterm_after_finished(proc, root, 3)
    assert "rerun with EXPERIMENT_ID=killed" in err
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["status"] == "interrupted" and 3 <= manifest["counts"]["finished"] < 16
    finished = [p.with_name(p.name.removesuffix(".result.json")) for p in root.rglob("run_*.result.json")]
    kept = {k: v for k, v in file_states(root).items()
            if any(k.startswith(str(f.relative_to(root)) + ".") for f in finished)}

    resumed = run_script(tmp_path, EXPERIMENT_ID="killed", **env)
    assert resumed.returncode == 0, resumed.stderr
    after = file_states(root)
    assert all(after[k] == v for k, v in kept.items()), "a finished run was redone"
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["status"] == "finished" and manifest["invocations"][-1]["skipped"] == len(finished)

    whole = run_script(tmp_path, EXPERIMENT_ID="whole", **env)
    assert whole.returncode == 0, whole.stderr
    assert comparable_summary(root) == comparable_summary(tmp_path / "out" / "whole")


async def test_resume_reads_the_index_and_rebuilds_it_when_lost(tmp_path, monkeypatch):
    from descriptor.run_index import read_index
    import mas.sweep.loop as loop

    req = scripted_request(tmp_path)
    first = await run_experiment(req)
    root = tmp_path / "e"
    assert sorted(read_index(root)) == sorted(r.run_id for r in first)
    checked: list[str] = []
    real = loop.finished_result
    monkeypatch.setattr(loop, "finished_result", lambda spec: checked.append(spec.run_id) or real(spec))
    await run_experiment(req)
    assert checked == []  # every finished run answered by the index, no result.json parsed
    (root / "runs.jsonl").unlink()
    again = await run_experiment(req)
    assert sorted(checked) == sorted(r.run_id for r in first)  # found in their directories ...
    assert sorted(read_index(root)) == sorted(r.run_id for r in again)  # ... and indexed again
