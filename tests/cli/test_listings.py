"""``list-systems`` and ``list-benchmarks`` say in one line what each entry is, plugins' entries included."""

from __future__ import annotations

import doctest
import sys
import textwrap

import pytest

import descriptor.describe
import descriptor.registry
from benchmark.base import Benchmark
from benchmark.registry import BENCHMARKS
from descriptor.describe import describe, listing
from main import main
from mas.systems import SYSTEMS


def test_the_doctests_hold():
    assert doctest.testmod(descriptor.describe).failed == 0


def test_every_built_in_system_and_benchmark_has_a_description():
    assert all(SYSTEMS[name].summary() for name in SYSTEMS.names())
    assert all(describe(BENCHMARKS[name]) for name in BENCHMARKS.names())
    assert describe(BENCHMARKS["gsm8k"]).startswith("GSM8K test split")
    assert SYSTEMS["debate"].summary().startswith("Debaters answer independently")


def test_list_systems_and_list_benchmarks_print_a_description_a_line(capsys):
    assert main(["list-systems"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SYSTEMS.names())  # not a terminal: one line each, for grep
    debate = next(line for line in lines if line.split()[0] == "debate")
    assert debate.endswith(SYSTEMS["debate"].summary())
    assert main(["list-benchmarks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(line for line in lines if line.startswith("arith ")).endswith(describe(BENCHMARKS["arith"]))


@pytest.mark.parametrize("command", ["list-systems", "list-benchmarks"])
def test_names_prints_the_names_alone(capsys, command):
    assert main([command, "--names"]) == 0
    names = SYSTEMS.names() if command == "list-systems" else BENCHMARKS.names()
    assert capsys.readouterr().out.splitlines() == names


def test_a_listing_at_a_terminal_width_wraps_descriptions_under_themselves_and_cuts_nothing():
    text = "WorkBench: 690 workplace tasks acted out with tools on five sandbox databases (calendar, email, website)."
    out = listing([("workbench", text), ("representative_exchange", "Groups elect representatives.")], width=50)
    lines = out.splitlines()
    assert all(len(line) <= 50 for line in lines)
    assert " ".join(" ".join(lines).split()).count("WorkBench: 690") == 1
    assert " ".join(out.split()) == f"workbench {text} representative_exchange Groups elect representatives."
    assert lines[1].startswith(" " * len("representative_exchange  "))  # under the description, not the name


def test_a_class_without_a_docstring_of_its_own_is_described_by_its_concrete_base_not_the_abstract_one():
    class Plain(Benchmark):
        pass

    class Derived(BENCHMARKS["arith"]):
        pass

    assert describe(Plain) == ""  # Benchmark's own docstring describes every adapter: none in particular
    assert describe(Derived) == describe(BENCHMARKS["arith"])

    class Said(Benchmark):
        description = "Said so."

    assert describe(Said) == "Said so."


PLUGIN = """
    '''A plugin of the test.'''
    from benchmark.base import BENCHMARKS
    from benchmark.arith import ArithBenchmark
    from mas.systems import SYSTEMS, register_system
    from mas.topologies.declaration import Topology


    @BENCHMARKS.register("plug_digits")
    class PlugDigits(ArithBenchmark):
        '''Digits of a plugin,
        over two lines.

        Not this paragraph.'''
        name = "plug_digits"


    def build_plug(rt):
        '''The plugin's one-agent graph.'''
        return SYSTEMS["sas"].build(rt)


    register_system(Topology(name="plug_sas", build=build_plug, roles=SYSTEMS["sas"].roles,
                             agents=SYSTEMS["sas"].agents))
"""


def test_a_plugins_entries_are_described_from_their_docstrings(tmp_path, monkeypatch, capsys):
    (tmp_path / "plug_listed.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(descriptor.registry, "_PLUGINS", [])
    try:
        assert main(["--plugin", "plug_listed", "list-benchmarks"]) == 0
        out = capsys.readouterr().out
        assert next(x for x in out.splitlines() if x.startswith("plug_digits")).endswith(
            "Digits of a plugin, over two lines.")
        assert main(["--plugin", "plug_listed", "list-systems"]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("plug_sas"))
        assert line.endswith("The plugin's one-agent graph.")
    finally:
        BENCHMARKS.unregister("plug_digits")
        SYSTEMS.unregister("plug_sas")
        sys.modules.pop("plug_listed", None)


def test_an_application_system_is_described_by_its_factorys_docstring():
    from mas.systems import get_system

    assert get_system("app:tests.app_fixtures:two_node").summary() == (
        "A planner and a solver, async nodes calling the chat model they are given.")
