"""A command's start-up imports its own command module, not every stage's (issue 33).

``summarize-experiment`` spent ~0.6 s of CPU importing the conformal and rollback commands' modules (numpy,
pydantic models) and ~0.3 s importing structlog, which it never logs through.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

from attribution.cli.main import COMMAND_MODULES, COMMANDS, HOOKED, command_modules

ROOT = Path(__file__).resolve().parent.parent


def test_the_command_table_names_the_module_registering_each_command():
    registered = {}
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        if hasattr(module, "register"):
            sub = argparse.ArgumentParser().add_subparsers()
            module.register(sub)
            registered.update(dict.fromkeys(sub.choices, name))
    assert registered == COMMANDS


def test_a_command_builds_its_own_module_with_its_hooks_and_help_builds_all():
    assert command_modules(["summarize-experiment", "--experiment-root", "x"]) == ("descriptor.cli",)
    assert command_modules(["run", "--benchmark", "arith"]) == ("mas.cli", *HOOKED["mas.cli"])
    assert command_modules(["--help"]) == COMMAND_MODULES
    assert command_modules(["no-such-command"]) == COMMAND_MODULES


def test_summarize_experiment_starts_without_structlog_or_the_other_commands_modules(tmp_path):
    probe = ("import sys\nfrom attribution.cli.main import main\n"
             f"code = main(['summarize-experiment', '--experiment-root', {str(tmp_path / 'none')!r}])\n"
             "print(code, *sorted(m for m in ('structlog', 'attribution.conformal', 'attribution.cli.sweep',"
             " 'mas.serving.catalogue') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2"]  # a root without runs is bad input; no other command's module was imported


def test_run_still_takes_the_rollback_hooks_options():
    from attribution.cli.main import build_parser

    args = build_parser(modules=command_modules(["run", "--rollback", "restart"])).parse_args(
        ["run", "--rollback", "restart"])
    assert args.rollback == "restart"


def test_importing_the_run_record_models_reads_no_source_file():
    # pydantic's use_attribute_docstrings read and parsed each model's source at import (~0.1 s of every
    # command's start-up); the field descriptions are set only where the JSON Schema files are written.
    probe = ("import linecache\nread = []\nreal = linecache.getlines\n"
             "linecache.getlines = lambda name, *a, **k: read.append(name) or real(name, *a, **k)\n"
             "import descriptor.records, descriptor.events, descriptor.run_metrics\n"
             "print(sorted({n.rsplit('/', 1)[-1] for n in read if '/descriptor/' in n}))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_summarize_experiment_with_plots_and_report_imports_neither_matplotlib_nor_numpy_ma(tmp_path):
    # matplotlib (~0.5 s) drew the plots; np.percentile imported numpy.ma (~50 ms) in every process on its first
    # call. The plots are SVG now and the quantiles are computed in floats (descriptor.stats).
    from tests.descriptor_fixtures import build_experiment

    root = build_experiment(tmp_path / "e", tasks=2)
    probe = ("import sys\nfrom attribution.cli.main import main\n"
             f"code = main(['summarize-experiment', '--experiment-root', {str(root)!r}])\n"
             "print(code, *sorted(m for m in ('matplotlib', 'numpy.ma', 'PIL') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1:] == ["0"], out.stdout[-2000:]
    assert (root / "report" / "index.html").is_file() and (root / "plots").is_dir()


HEAVY_AFTER_PASS = ("numpy", "jinja2", "rich")
"""What only the steps after the pass over the runs need: the economics' bootstrap, the report's pages, the table."""


def test_the_pass_over_the_runs_imports_neither_numpy_nor_jinja2_nor_rich(tmp_path):
    # The forked workers inherit what the parent imported before the pass: numpy, jinja2 and rich (~0.3 s of CPU)
    # are imported while they read (descriptor.cli.prepare_after_pass), not before they fork nor by the pass.
    from tests.descriptor_fixtures import build_experiment

    root = build_experiment(tmp_path / "e", tasks=2)
    probe = ("import sys\nimport descriptor.cli, descriptor.report.build\n"
             f"heavy = {HEAVY_AFTER_PASS!r}\nseen = {{}}\n"
             "def loaded(): return [m for m in heavy if m in sys.modules]\n"
             "descriptor.cli.prepare_after_pass = lambda report: seen.setdefault('before the pass', loaded())\n"
             "real = descriptor.report.build.read_all\n"
             "def read_all(*a, **k):\n"
             "    out = real(*a, **k)\n"
             "    seen['after the pass'] = loaded()\n"
             "    return out\n"
             "descriptor.report.build.read_all = read_all\n"
             "from attribution.cli.main import main\n"
             f"code = main(['summarize-experiment', '--experiment-root', {str(root)!r}])\n"
             "print(code, seen, loaded(), file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    last = out.stderr.strip().splitlines()[-1]
    assert last == ("0 {'before the pass': [], 'after the pass': []} ['numpy', 'jinja2', 'rich']"), out.stderr[-2000:]


def test_fork_chunks_does_the_callers_meanwhile_work_once_its_workers_have_forked():
    import multiprocessing
    import os

    from descriptor.parallel import fork_chunks

    seen = []
    parts = fork_chunks(lambda part: (os.getpid(), part), list(range(10)), workers=2,
                        meanwhile=lambda: seen.append(len(multiprocessing.active_children())))
    assert seen == [2]  # once, in this process, both workers already started
    assert [x for _, part in parts for x in part] == list(range(10))
    assert os.getpid() not in {pid for pid, _ in parts}
    single = []
    assert fork_chunks(lambda part: part, [1, 2], workers=1, meanwhile=lambda: single.append(1)) == [[1, 2]]
    assert single == [1]
