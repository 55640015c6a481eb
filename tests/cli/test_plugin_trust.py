"""A plugin that breaks is named, whatever it raises, and breaks only what uses it.

- a ``--plugin`` module (or config ``plugins``) raising ``SystemExit`` at import is an error naming it (exit 2),
  not a silent ``exit 0`` with nothing written; a ``KeyboardInterrupt`` still interrupts;
- an installed entry point that does not load breaks the commands that read its group only (a broken sweep hook
  no longer breaks ``list-systems``), and a sweep loads every group before its first run (a broken trace
  processor no longer lets every run start and crash).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import descriptor.registry
from main import main

ROOT = Path(__file__).resolve().parents[2]
RUN = ["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--task-limit", "1",
       "--progress", "none"]


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(descriptor.registry, "_PLUGINS", [])
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("plug_")]:
        del sys.modules[name]


@pytest.mark.parametrize("raises", ["SystemExit(0)", "SystemExit('bye')", "SystemExit(3)"])
@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_plugin_that_exits_at_import_is_an_error_naming_it_and_nothing_is_run(plugin_dir, capsys, raises, how):
    (plugin_dir / "plug_exit.py").write_text(f"import sys\nraise {raises}\n")
    out = ["--output-root", str(plugin_dir / "out"), "--experiment-id", "e"]
    if how == "flag":
        argv = ["--plugin", "plug_exit", *RUN, *out]
    else:
        (plugin_dir / "exp.toml").write_text('plugins = ["plug_exit"]\n')
        argv = [*RUN, "--config", "exp.toml", *out]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "plugin 'plug_exit' did not load: SystemExit" in err and len(err.strip().splitlines()) == 1, err
    assert not (plugin_dir / "out").exists()


def test_a_plugin_interrupted_at_import_still_interrupts(plugin_dir, capsys):
    (plugin_dir / "plug_ctrl_c.py").write_text("raise KeyboardInterrupt\n")
    assert main(["--plugin", "plug_ctrl_c", "list-systems"]) == 130
    assert "interrupted" in capsys.readouterr().err


def _site(tmp_path: Path, group: str, body: str) -> dict[str, str]:
    """An installed distribution whose entry point of ``group`` is a module running ``body``; the environment of
    a command that sees it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "brokenplug.py").write_text(textwrap.dedent(body))
    info = site / "brokenplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\nbroken = brokenplug\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}


def cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.parametrize("group, body", [
    ("mas_econ.sweep_hooks", "raise RuntimeError('HOOK_TOKEN is not set')\n"),
    ("mas_econ.trace_processors", "raise RuntimeError('exporter endpoint missing')\n"),
    ("mas_econ.trace_processors", "import sys\nsys.exit(0)\n"),
    ("mas_econ.methods", "raise RuntimeError('a method plugin of another stage')\n"),
])
def test_a_broken_entry_point_breaks_only_what_reads_its_group_and_stops_a_sweep_before_its_first_run(
        tmp_path, group, body):
    env = _site(tmp_path, group, body)
    listed = cli(env, "list-systems", cwd=tmp_path)
    assert listed.returncode == 0 and "sas" in listed.stdout.split(), listed.stderr[-2000:]
    assert cli(env, "list-benchmarks", cwd=tmp_path).returncode == 0
    run = cli(env, *RUN, "--output-root", str(tmp_path / "out"), "--experiment-id", "e", cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-2000:]
    assert f"brokenplug:brokenplug (entry point {group}/broken) did not load" in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr[-2000:]
    assert not list((tmp_path / "out").rglob("run_0.*"))  # no run started
