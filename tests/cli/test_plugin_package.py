"""examples/plugin, pip-installed outside the checkout: its benchmark, topology and provider reach the CLI, sweeps (local and
dask with 2 worker processes) and the report; a plugin module that is not installed reaches dask workers too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """The example installed with pip into a directory of its own; the environment that sees it."""
    base = tmp_path_factory.mktemp("plugin")
    src = base / "src"
    shutil.copytree(ROOT / "examples" / "plugin", src)  # a build writes build/ and *.egg-info beside the sources
    target = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(target), str(src)], check=True, capture_output=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}


def cli(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def sweep(env: dict[str, str], out: Path, exp: str, *extra: str, cwd: Path = ROOT) -> Path:
    cli(env, "run", "--benchmark", "digit_sum", "--systems", "round_robin,sas", "--model", "scripted",
        "--task-limit", "2", "--output-root", str(out), "--experiment-id", exp, "--progress", "none", *extra, cwd=cwd)
    return out / exp


def test_the_installed_plugins_benchmark_and_topology_are_listed_swept_and_reported(installed, tmp_path):
    assert "digit_sum" in cli(installed, "list-benchmarks").stdout.split()
    systems = cli(installed, "list-systems", "--long").stdout
    assert "round_robin\tspeaker,judge\tmas_econ_example.round_robin:round_robin" in systems
    assert '"round_robin": "./mas/studio.py:round_robin"' in cli(installed, "studio-config").stdout
    root = sweep(installed, tmp_path, "local")
    assert len(list((root / "digit_sum" / "round_robin").glob("*/run_0.result.json"))) == 2
    html = (root / "report" / "index.html").read_text(encoding="utf-8")
    assert ">round_robin<" in html and ">digit_sum<" in html
    assert 'src="../digit_sum/round_robin/mas_graph.png"' in html  # its agent picture, from its declaration


def test_the_installed_plugins_provider_answers_a_sweep_and_its_calls_name_its_model(installed, tmp_path):
    (tmp_path / "exp.toml").write_text('[models.default]\nprovider = "digits"\nmodel = "digit-adder"\n')
    cli(installed, "run", "--config", str(tmp_path / "exp.toml"), "--benchmark", "digit_sum", "--systems",
        "round_robin", "--task-limit", "2", "--output-root", str(tmp_path), "--experiment-id", "p", "--progress",
        "none")
    results = [json.loads(p.read_text()) for p in (tmp_path / "p" / "digit_sum").glob("*/*/run_0.result.json")]
    assert len(results) == 2 and all(r["success"] for r in results)  # the digit adder is always right
    traces = "".join(p.read_text() for p in (tmp_path / "p" / "digit_sum").glob("*/*/run_0.trace.jsonl"))
    assert '"model":"digit-adder"' in traces and '"model":"scripted"' not in traces


def test_a_dask_sweep_with_two_worker_processes_runs_the_installed_plugins_entries(installed, tmp_path):
    root = sweep(installed, tmp_path, "dask", "--executor", "dask", "--workers", "2")
    assert len(list(root.glob("digit_sum/*/*/run_0.result.json"))) == 4


def test_dask_workers_import_a_plugin_module_that_is_not_installed(tmp_path):
    (tmp_path / "my_bench.py").write_text(textwrap.dedent("""
        from benchmark.arith import ArithBenchmark
        from benchmark.base import BENCHMARKS

        @BENCHMARKS.register("my_arith")
        class MyArith(ArithBenchmark):
            name = "my_arith"
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the plugin is found in the working directory only
    cli(env, "--plugin", "my_bench", "run", "--benchmark", "my_arith", "--model", "scripted", "--task-limit", "2",
        "--output-root", str(tmp_path / "out"), "--experiment-id", "d", "--progress", "none", "--executor", "dask",
        "--workers", "2", cwd=tmp_path)
    assert len(list((tmp_path / "out" / "d" / "my_arith" / "sas").glob("*/run_0.result.json"))) == 2
