"""The plots' child process: draws, says when it failed, and ends when there is nothing to draw."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from descriptor.plots import PLOT_FILES
from descriptor.summaries import summarize_experiment
from tests.otel_helpers import scripted_sweep

ROOT = Path(__file__).resolve().parent.parent


def _within(seconds: float, fn) -> None:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) when it takes longer than ``seconds``."""
    err: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            err.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    if err:
        raise err[0]


CHILD = """
from descriptor.economics import EconomicsSettings
from descriptor.plot_job import PlotJob
job = PlotJob()
assert job._proc is not None, "a fresh process has one thread: the plots are forked"
job.wait()  # nothing to draw: the child ends
job = PlotJob()
job.draw(None, [], [], None, EconomicsSettings())
try:
    job.wait()
except RuntimeError as err:
    print("failed:", err)
"""


def test_the_child_ends_with_nothing_to_draw_and_a_failure_is_an_error():
    # a fresh interpreter: the test process may hold other tests' threads, and then nothing is forked
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "failed: drawing the plots failed in their process" in out.stdout


def test_summaries_draw_the_plots_beside_the_report(tmp_path):
    root = scripted_sweep(tmp_path, systems=["sas", "debate"], tasks=2)
    assert not (root / "plots").exists()
    seen: list[bool] = []
    _within(120, lambda: summarize_experiment(root, alongside=lambda: seen.append(True)))
    assert seen == [True]
    assert all((root / "plots" / name).stat().st_size > 1000 for name in PLOT_FILES)
    # unchanged: nothing is redrawn, and the child still ends
    mtimes = [(root / "plots" / name).stat().st_mtime_ns for name in PLOT_FILES]
    _within(60, lambda: summarize_experiment(root))
    assert [(root / "plots" / name).stat().st_mtime_ns for name in PLOT_FILES] == mtimes
