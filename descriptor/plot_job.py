"""The plots drawn in a forked child process while this one reads the runs and writes the report.

Importing matplotlib (~0.5 s) and drawing the three figures (~0.4 s) were
over half of a cold ``summarize-experiment`` of 100 runs. A child forked when
the summary starts imports matplotlib while this process reads the runs, then
draws while it writes the report: on two cores most of that time is hidden.
Where forking is not safe (:func:`descriptor.parallel.fork_safe`) the plots
are drawn in this process, as before.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from descriptor.economics import EconomicsSettings
from descriptor.parallel import die_with_parent, fork_safe


def _child(conn: Connection, parents: Connection, parent_pid: int) -> None:
    die_with_parent(parent_pid)  # pool workers forked later hold the parent's end too: its close is no signal
    parents.close()  # the fork copied the parent's end: held open here, it would hide the end of input
    # matplotlib loads here while the parent reads the runs
    from descriptor import plots

    try:
        args = conn.recv()
    except EOFError:  # nothing to draw
        return
    plots.write_plots(*args)


class PlotJob:
    """Draws :mod:`descriptor.plots`' figures in a child process (or, where forking is unsafe, in this one)."""

    def __init__(self) -> None:
        self._proc: Any = None
        self._conn: Connection | None = None
        self._sent = False
        if fork_safe():
            ctx = multiprocessing.get_context("fork")
            self._conn, theirs = ctx.Pipe()
            self._proc = ctx.Process(target=_child, args=(theirs, self._conn, os.getpid()), name="mas-plots",
                                     daemon=True)
            self._proc.start()
            theirs.close()

    def draw(self, plot_dir: Path, descriptors: Sequence[dict[str, Any]], rollups: Sequence[dict[str, Any]],
             topology: dict[str, Any], settings: EconomicsSettings) -> None:
        """Start drawing (see :func:`descriptor.plots.write_plots`); :meth:`wait` for the files."""
        args = (plot_dir, list(descriptors), list(rollups), topology, settings)
        if self._conn is None:
            from descriptor.plots import write_plots

            write_plots(*args)
        else:
            self._conn.send(args)
            self._sent = True

    def wait(self) -> None:
        """Until the plots are written (the child exits); raises RuntimeError when drawing failed."""
        if self._proc is None:
            return
        if not self._sent:  # nothing to draw: no need to wait for the child's matplotlib import to finish
            self.cancel()
            return
        assert self._conn is not None
        self._conn.close()  # the child sees the end of input once it has read what was sent
        self._proc.join()
        code, self._proc = self._proc.exitcode, None
        if code != 0:
            raise RuntimeError(f"drawing the plots failed in their process (exit code {code}; traceback above)")

    def cancel(self) -> None:
        """Stop the child without waiting for its plots (nothing to draw, or after an error)."""
        if self._proc is not None:
            assert self._conn is not None
            self._conn.close()
            self._proc.terminate()
            self._proc.join()
            self._proc = None
