"""The command line on top: each stage declares its commands (:mod:`descriptor.commands`), ``--help`` lists them
without importing any command's module, and a command imports its own module only, with the modules adding options
to it (``summarize-experiment`` spent ~0.6 s of CPU importing the conformal and rollback commands'
modules, numpy and pydantic models, and ~0.3 s importing structlog, which it never logs through).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import descriptor.registry
from descriptor.commands import COMMANDS, Command, command, hooks_of
from descriptor.registry import RegistryError
from mas_econ.cli import STAGES, build_parser, chosen, commands, main

ROOT = Path(__file__).resolve().parents[2]


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _probe(code: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          env=env)


def test_every_declared_command_is_filled_by_its_own_modules_function_under_its_help_line():
    declared = commands()
    assert [name for name, _ in declared][:3] == ["list-benchmarks", "benchmark-info", "benchmark-check"]
    assert [c.module.split(".")[0] for _, c in declared] == sorted((c.module.split(".")[0] for _, c in declared),
                                                                   key=STAGES.index)  # stage by stage
    sub = _subparsers(build_parser())
    listed = [(a.dest, a.help) for a in sub._choices_actions]
    assert listed == [(name, c.help) for name, c in declared]
    for name, _ in declared:
        assert callable(sub.choices[name].get_default("func")) or name == "model", name  # model: per subcommand
    model = _subparsers(sub.choices["model"])
    assert all(callable(p.get_default("func")) for p in model.choices.values())


def _binds_a_handler(path: Path) -> bool:
    """``path`` fills a command's parser: it calls ``set_defaults(func=...)``."""
    return any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "set_defaults"
               and any(k.arg == "func" for k in n.keywords) for n in ast.walk(ast.parse(path.read_text())))


def test_every_module_that_fills_a_command_parser_is_declared_by_its_stage():
    filling = {".".join(p.relative_to(ROOT).with_suffix("").parts) for stage in STAGES
               for p in (ROOT / stage).rglob("*.py") if _binds_a_handler(p)}
    declared = {c.module for _, c in commands()}
    assert filling == declared


def test_the_declarations_import_nothing_heavy():
    out = _probe("""
        import sys
        before = set(sys.modules)
        import benchmark.commands, mas.commands, descriptor.commands, attribution.commands
        new = sorted(set(sys.modules) - before)
        print(" ".join(new))
    """)
    new = out.stdout.split()
    ours = [m for m in new if m.split(".")[0] in STAGES]
    allowed = {*STAGES, *(f"{s}.commands" for s in STAGES), "descriptor.registry", "descriptor.errors",
               "descriptor.suggest", "descriptor.ownership", "descriptor.exports"}
    assert set(ours) <= allowed, sorted(set(ours) - allowed)
    assert not {"pydantic", "numpy", "rich", "structlog", "langgraph"} & set(new)


def test_the_command_is_the_first_word_that_is_declared():
    assert chosen(["summarize-experiment", "--experiment-root", "x"]) == "summarize-experiment"
    assert chosen(["--help"]) is None and chosen([]) is None and chosen(["no-such-command"]) is None
    assert hooks_of("run") == ["attribution.cli.sweep"] and hooks_of("summarize-experiment") == []


COMMAND_MODULES = sorted({c.module for _, c in commands()} | {"attribution.cli.sweep"})
"""Every module a command's parser or a hook lives in."""


def _imported_command_modules(argv: list[str]) -> tuple[int, list[str]]:
    out = _probe(f"""
        import sys
        from mas_econ.cli import main
        code = main({argv!r})
        print(code, *sorted(m for m in {COMMAND_MODULES!r} if m in sys.modules), file=sys.stderr)
    """)
    code, *loaded = out.stderr.strip().splitlines()[-1].split()
    return int(code), loaded


def test_help_lists_every_command_and_imports_no_commands_module():
    code, loaded = _imported_command_modules(["--help"])
    assert (code, loaded) == (0, [])
    code, loaded = _imported_command_modules(["no-such-command"])
    assert (code, loaded) == (2, [])


def test_a_command_imports_its_own_module_and_its_hooks_only():
    assert _imported_command_modules(["run", "--help"]) == (0, ["attribution.cli.sweep", "mas.cli"])
    assert _imported_command_modules(["plan", "--baseline-rate", "0.5", "--effect", "0.1"]) == (
        0, ["descriptor.plan_cli"])


def test_summarize_experiment_starts_without_structlog_or_the_other_commands_modules(tmp_path):
    probe = ("import sys\nfrom mas_econ.cli import main\n"
             f"code = main(['summarize-experiment', '--experiment-root', {str(tmp_path / 'none')!r}])\n"
             "print(code, *sorted(m for m in ('structlog', 'attribution.conformal', 'mas.serving.catalogue', "
             f"*{COMMAND_MODULES!r}) if m in sys.modules and m != 'descriptor.cli'))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2"]  # a root without runs is bad input; no other command's module was imported


def test_run_still_takes_the_rollback_hooks_options():
    args = build_parser(fill=["run"]).parse_args(["run", "--rollback", "restart"])
    assert args.rollback == "restart"


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A working directory for plugin modules; the commands they declare are unregistered afterwards."""
    before = set(COMMANDS.names())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(descriptor.registry, "_PLUGINS", [])
    yield tmp_path
    for name in set(COMMANDS.names()) - before:
        COMMANDS.unregister(name)
    for name in [m for m in sys.modules if m.startswith("plug_")]:
        del sys.modules[name]


HELLO = """
    from descriptor.commands import command


    @command("hello", "say hello")
    def hello_parser(p):
        p.description = "Says hello."
        p.add_argument("--name", default="world")
        p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)
"""


def test_a_plugin_module_adds_a_command_with_the_decorator(plugin_dir, capsys):
    (plugin_dir / "plug_hello.py").write_text(textwrap.dedent(HELLO))
    assert main(["hello", "--name", "you", "--plugin", "plug_hello"]) == 0
    assert capsys.readouterr().out == "hello you\n"
    assert main(["--plugin", "plug_hello", "--help"]) == 0
    listing = capsys.readouterr().out
    assert "say hello" in listing and listing.index("label-failures") < listing.index("hello ")  # after the stages'
    with pytest.raises(RegistryError, match=r"command 'hello' is registered twice: by plug_hello:hello_parser and "
                                            r"by other:fill"):
        COMMANDS.register("hello", Command("say hello", "other:fill"), origin="other:fill")


def test_an_installed_packages_entry_point_adds_a_command(tmp_path):
    (tmp_path / "greetplug.py").write_text(textwrap.dedent("""
        from descriptor.commands import Command

        GREET = Command("greet someone", "greetplug:fill")


        def fill(p):
            p.set_defaults(func=lambda args: print("greetings") or 0)
    """))
    info = tmp_path / "greetplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greetplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mas_econ.commands]\ngreet = greetplug:GREET\n")
    env = {"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"}
    out = _probe("from mas_econ.cli import main; import sys; sys.exit(main(['greet']))", cwd=tmp_path, env=env)
    assert (out.returncode, out.stdout) == (0, "greetings\n"), out.stderr[-2000:]
    out = _probe("from mas_econ.cli import main; import sys; sys.exit(main(['--help']))", cwd=tmp_path, env=env)
    assert "greet someone" in out.stdout
    (info / "entry_points.txt").write_text("[mas_econ.commands]\ngreet = greetplug:fill\n")  # not a Command
    out = _probe("from mas_econ.cli import main; import sys; sys.exit(main(['--help']))", cwd=tmp_path, env=env)
    assert out.returncode == 2 and "command plugin greetplug:greetplug:fill" in out.stderr
    assert "expected a descriptor.commands.Command" in out.stderr
    out = _probe("from mas_econ.cli import main; import sys; sys.exit(main(['plan', '--baseline-rate', '0.5', "
                 "'--effect', '0.1']))", cwd=tmp_path, env=env)  # the stages' commands do not read the plugins'
    assert out.returncode == 0 and "tasks" in out.stdout, out.stderr[-2000:]


def test_a_stage_command_starts_without_reading_the_installed_entry_points():
    # reading every distribution's entry points is 10-60 ms; plan, report, summarize-experiment need none
    out = _probe("""
        import descriptor.registry
        from mas_econ.cli import main
        code = main(["plan", "--baseline-rate", "0.5", "--effect", "0.1"])
        print(code, descriptor.registry._installed_entry_points.cache_info().misses)
    """)
    assert out.stdout.split()[-2:] == ["0", "0"], out.stderr[-2000:]


def test_a_declaration_names_its_function_as_module_and_name_and_a_missing_one_is_named():
    with pytest.raises(RegistryError, match=r"module:function, not 'nothing here'"):
        Command("x", "nothing here")
    parser = argparse.ArgumentParser(prog="main.py gone")
    with pytest.raises(RegistryError, match=r"main.py gone: no_such_module_here could not be imported"):
        Command("x", "no_such_module_here:fill").fill(parser)
    with pytest.raises(RegistryError, match=r"main.py gone: descriptor.commands:nope does not exist"):
        Command("x", "descriptor.commands:nope").fill(parser)


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
    probe = ("import sys\nfrom mas_econ.cli import main\n"
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
             "from mas_econ.cli import main\n"
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
