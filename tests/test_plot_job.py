"""The plots' child process: draws, says when it failed, and ends when there is nothing to draw."""

from __future__ import annotations

import threading

import pytest

from descriptor.economics import EconomicsSettings
from descriptor.plot_job import PlotJob
from descriptor.plots import PLOT_FILES
from descriptor.summaries import summarize_experiment
from tests.otel_helpers import scripted_sweep


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


def test_nothing_to_draw_ends_the_child():
    job = PlotJob()
    assert job._proc is not None  # pytest's process has one thread: the plots are forked
    _within(30, job.wait)


def test_a_failed_drawing_is_an_error():
    job = PlotJob()
    job.draw(None, [], [], None, EconomicsSettings())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="drawing the plots failed"):
        _within(60, job.wait)


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
