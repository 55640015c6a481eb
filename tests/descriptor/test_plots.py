"""The summaries' plots: SVG files drawn in the summarising process, redrawn only when what they show changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from descriptor.plots import PLOT_FILES
from descriptor.summaries import summarize_experiment
from tests.descriptor_fixtures import build_experiment

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, os, sys
forks = []
real_fork = os.fork
os.fork = lambda: forks.append(1) or real_fork()
from descriptor.summaries import summarize_experiment
summarize_experiment(sys.argv[1])
print(json.dumps({"forks": len(forks), "matplotlib": "matplotlib" in sys.modules}))
"""


def test_the_plots_are_drawn_without_matplotlib_or_a_child_process(tmp_path):
    root = build_experiment(tmp_path / "e", tasks=2)  # too few tasks for the summaries' workers
    out = subprocess.run([sys.executable, "-c", PROBE, str(root)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == {"forks": 0, "matplotlib": False}
    for name in PLOT_FILES:
        text = (root / "plots" / name).read_text(encoding="utf-8")
        assert text.startswith("<svg") and "<style>" in text  # a file that shows alone
        if name != "success_ci.svg":  # the bars are labelled by benchmark and system on two lines
            assert ">sas</text>" in text and ">debate</text>" in text, name


def test_an_unchanged_summary_redraws_nothing_and_a_missing_plot_is_drawn_again(tmp_path):
    root = build_experiment(tmp_path / "e", tasks=2)
    seen: list[bool] = []
    summarize_experiment(root, alongside=lambda: seen.append(all((root / "plots" / n).is_file() for n in PLOT_FILES)))
    assert seen == [True]  # the report is written once the plots are
    mtimes = [(root / "plots" / name).stat().st_mtime_ns for name in PLOT_FILES]
    summarize_experiment(root)
    assert [(root / "plots" / name).stat().st_mtime_ns for name in PLOT_FILES] == mtimes
    (root / "plots" / PLOT_FILES[1]).unlink()
    (root / "plots" / "success_ci.png").write_bytes(b"an earlier version's drawing")
    summarize_experiment(root)
    assert (root / "plots" / PLOT_FILES[1]).is_file() and not (root / "plots" / "success_ci.png").exists()
