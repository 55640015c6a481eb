"""Extending from outside: plugin modules (``--plugin``, config ``plugins``) reach every registry and hook."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

import descriptor.registry
from attribution.conformal import CONFORMAL_METHODS, Aggregator, fit, method_names, predict
from attribution.methods import METHODS
from attribution.sources.scorefile import ScoreRecord
from attribution.scorers import SCORERS
from benchmark.base import Task
from benchmark.registry import BENCHMARKS, get_benchmark
from main import main
from mas.config import ConfigError, ExperimentConfig, ModelRoute, parse_config
from mas.sweep.hooks import SWEEP_HOOKS, TRACE_PROCESSORS
from mas.sweep.runner import RunSpec, execute_run
from mas.systems import SYSTEMS

REGISTRIES = [BENCHMARKS, SYSTEMS, METHODS, SCORERS, CONFORMAL_METHODS, SWEEP_HOOKS, TRACE_PROCESSORS]

TINY_PLUGIN = """
    from benchmark.arith import ArithBenchmark
    from benchmark.base import BENCHMARKS
    from mas.systems import SYSTEMS, register_system
    from mas.topologies.declaration import Topology


    @BENCHMARKS.register("tiny_arith")
    class TinyArith(ArithBenchmark):
        name = "tiny_arith"


    register_system(Topology(name="tiny_sas", build=SYSTEMS["sas"].build, roles=SYSTEMS["sas"].roles,
                             agents=SYSTEMS["sas"].agents))
"""


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A working directory holding plugin modules; whatever they register is unregistered afterwards."""
    # The project's modules that register on import, imported before the snapshot: imported lazily during the test
    # (`run` building its parser), their entries were taken for the plugins' and unregistered, and they register
    # only once per process, so later tests lost `run --rollback`.
    import attribution.cli.sweep  # noqa: F401
    import mas.otel  # noqa: F401

    before = {id(r): set(r.names()) for r in REGISTRIES}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(descriptor.registry, "_PLUGINS", [])
    yield tmp_path
    for reg in REGISTRIES:
        for name in set(reg.names()) - before[id(reg)]:
            reg.unregister(name)
    for name in [m for m in sys.modules if m.startswith("plug_")]:
        del sys.modules[name]


def write_plugin(where: Path, name: str, source: str) -> str:
    (where / f"{name}.py").write_text(textwrap.dedent(source))
    return name


@pytest.mark.parametrize("position", ["before", "after"])
def test_a_plugin_module_in_the_current_directory_adds_a_benchmark_and_a_system_to_the_listings(
        plugin_dir, capsys, position):
    mod = write_plugin(plugin_dir, "plug_tiny", TINY_PLUGIN)
    argv = ["--plugin", mod, "list-benchmarks"] if position == "before" else ["list-benchmarks", "--plugin", mod]
    assert main(argv) == 0
    assert "tiny_arith" in capsys.readouterr().out.split()
    assert main(["list-systems", "--long", f"--plugin={mod}"]) == 0
    assert f"tiny_sas\tsolver\t{mod}:tiny_sas" in capsys.readouterr().out


def test_a_plugin_that_does_not_import_is_a_one_line_error_naming_it(plugin_dir, capsys):
    assert main(["--plugin", "plug_missing", "list-benchmarks"]) == 2
    assert "error: plugin 'plug_missing' could not be imported" in capsys.readouterr().err


@pytest.mark.parametrize("body", ["raise RuntimeError('MYPLUG_KEY is not set')", "def broken(:\n    pass",
                                  "undefined_name + 1"])
@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_plugin_that_fails_as_it_runs_is_a_one_line_error_naming_it_and_exits_2(plugin_dir, capsys, body, how):
    """Not only a module that is missing: one that raises, or does not compile, is named with what went wrong
    (it gave a traceback and exit 1)."""
    mod = write_plugin(plugin_dir, "plug_raises", body + "\n")
    if how == "flag":
        argv = ["--plugin", mod, "list-benchmarks"]
    else:
        (plugin_dir / "exp.toml").write_text(f'plugins = ["{mod}"]\n')
        argv = ["run", "--config", "exp.toml", "--benchmark", "arith", "--systems", "sas", "--model", "scripted",
                "--task-limit", "1", "--progress", "none"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"plugin 'plug_raises' did not load" in err and "Traceback" not in err


def test_run_warns_when_every_run_of_a_plugin_system_ends_in_an_error_of_its_own(plugin_dir, capsys):
    """A bug in a plugin topology (an exception in its graph) fails every run; by the documented rule those are
    failed tasks, and the summary said only success 0. ``run`` now says so for that system, and only for it."""
    mod = write_plugin(plugin_dir, "plug_broken", """
        from typing import TypedDict

        from langgraph.graph import END, START, StateGraph

        from mas.systems import SYSTEMS, register_system
        from mas.topologies.declaration import Topology


        class S(TypedDict, total=False):
            answer: dict


        def build(rt):
            async def node(state):
                raise IndexError("list index out of range")

            g = StateGraph(S)
            g.add_node("n", node)
            g.add_edge(START, "n")
            g.add_edge("n", END)
            return g


        register_system(Topology(name="plug_broken", build=build, roles=SYSTEMS["sas"].roles,
                                 agents=SYSTEMS["sas"].agents))
    """)
    assert main(["--plugin", mod, "run", "--benchmark", "arith", "--task-limit", "2", "--systems", "sas,plug_broken",
                 "--model", "scripted", "--output-root", str(plugin_dir), "--experiment-id", "e",
                 "--progress", "none"]) == 0
    err = capsys.readouterr().err
    assert "warning: every run of plug_broken ended in an error of the system's own (2 runs; first: " in err
    assert "IndexError: list index out of range" in err and "every run of sas" not in err
    # every run records the plugin code it ran with, and the statistics' packages
    import json

    metas = [json.loads(p.read_text()) for p in sorted((plugin_dir / "e").rglob("run_0.metadata.json"))]
    assert len(metas) == 4 and all(m["plugins"] == [mod] and m["versions"]["numpy"] for m in metas)


def test_benchmark_check_of_a_plugin_benchmark_whose_evaluation_raises_names_the_task_and_exits_2(plugin_dir, capsys):
    mod = write_plugin(plugin_dir, "plug_raising_eval", """
        from benchmark.arith import ArithBenchmark
        from benchmark.base import BENCHMARKS


        @BENCHMARKS.register("raising_arith")
        class RaisingArith(ArithBenchmark):
            name = "raising_arith"

            def evaluate(self, task, answer, environment=None, **kw):
                raise KeyError("expected")
    """)
    assert main(["--plugin", mod, "benchmark-check", "--benchmark", "raising_arith", "--task-limit", "2"]) == 2
    err = capsys.readouterr().err
    assert "benchmark 'raising_arith': judging task" in err and "KeyError: 'expected'" in err
    assert "Traceback" not in err


def test_finish_loop_without_a_controller_decision_says_what_the_topology_missed():
    from mas.topologies.loop import finish_loop

    with pytest.raises(RuntimeError, match=r"finish_loop\(stage='chain'\): the stage took no controller decision"):
        asyncio.run(finish_loop(None, {"steps_done": 0}, stage="chain", state_id=None, winner={"agent": "a"}))


def test_a_plugin_registering_a_taken_name_names_both_origins(plugin_dir, capsys):
    mod = write_plugin(plugin_dir, "plug_clash", """
        from benchmark.arith import ArithBenchmark
        from benchmark.base import BENCHMARKS

        @BENCHMARKS.register("arith")
        class Other(ArithBenchmark):
            pass
    """)
    assert main(["--plugin", mod, "list-benchmarks"]) == 2
    err = capsys.readouterr().err
    assert "benchmark 'arith' is registered twice: by benchmark.arith:ArithBenchmark and by plug_clash:Other" in err


def test_the_config_key_plugins_imports_its_modules_and_names_the_key_when_one_fails(plugin_dir):
    mod = write_plugin(plugin_dir, "plug_tiny", TINY_PLUGIN)
    cfg = parse_config({"plugins": [mod]}, "exp.toml")
    assert cfg.plugins == [mod] and "tiny_arith" in BENCHMARKS and "tiny_sas" in SYSTEMS
    with pytest.raises(ConfigError, match=r"exp.toml: plugins: .*plugin 'plug_nope' could not be imported"):
        parse_config({"plugins": ["plug_nope"]}, "exp.toml")
    with pytest.raises(ConfigError, match=r"plugins: .*expected a dotted Python module name, got 'a b'"):
        parse_config({"plugins": ["a b"]}, "exp.toml")


def test_a_plugin_sweep_hook_adds_an_option_to_run_and_sees_the_results_before_the_summary(plugin_dir, capsys):
    mod = write_plugin(plugin_dir, "plug_hook", """
        from mas.sweep.hooks import SWEEP_HOOKS, SweepHook

        def add_arguments(parser):
            parser.add_argument("--count-runs", action="store_true")

        def prepare(args, req):
            if not args.count_runs:
                return None
            return lambda results: print(f"hook saw {len(results)} run(s) of {req.systems}") or 0

        SWEEP_HOOKS.register("count_runs", SweepHook(add_arguments=add_arguments, prepare=prepare))
    """)
    code = main(["--plugin", mod, "run", "--benchmark", "arith", "--model", "scripted", "--task-limit", "1",
                 "--count-runs", "--output-root", str(plugin_dir / "out"), "--experiment-id", "h",
                 "--progress", "none"])
    out = capsys.readouterr().out
    assert code == 0 and "hook saw 1 run(s) of ['sas']" in out
    assert out.index("hook saw") < out.index("report:")


def test_a_registered_trace_processor_receives_every_event_of_a_sweep_run(tmp_path):
    seen: list[str] = []

    class Collect:
        def on_event(self, event, line):
            seen.append(event.event_type)

        def close(self):
            seen.append("closed")

    TRACE_PROCESSORS.register("test_collect", lambda cfg, meta: [Collect()], origin="tests.cli.test_plugins:collect")
    try:
        cfg = ExperimentConfig(output_root=str(tmp_path), models={"default": ModelRoute(provider="scripted",
                                                                                          model="scripted")})
        spec = RunSpec(experiment_id="x", output_root=tmp_path, benchmark="arith", system="sas",
                       task=Task(task_id="t", question="What is 2 + 3?", reference=5), run_index=0, seed=0)
        asyncio.run(execute_run(spec, cfg, get_benchmark("arith")))
    finally:
        TRACE_PROCESSORS.unregister("test_collect")
    written = [line for line in spec.paths.trace.read_text().splitlines() if line]
    assert seen[-1] == "closed" and len(seen) - 1 == len(written) and "finalize" in seen



@pytest.mark.parametrize("factory", [lambda cfg, meta: 1 / 0, 42, lambda cfg, meta: [42]],
                         ids=["raises", "not-callable", "no-processor"])
def test_a_broken_trace_processor_factory_is_skipped_and_the_run_is_measured(tmp_path, factory):
    """A factory that fails when called is logged and skipped, as a failing processor is: the run finishes
    and is recorded; it used to crash every run of the sweep outside its graph."""
    TRACE_PROCESSORS.register("test_broken", factory, origin="tests.cli.test_plugins:broken")
    try:
        cfg = ExperimentConfig(output_root=str(tmp_path), models={"default": ModelRoute(provider="scripted",
                                                                                          model="scripted")})
        spec = RunSpec(experiment_id="x", output_root=tmp_path, benchmark="arith", system="sas",
                       task=Task(task_id="t", question="What is 2 + 3?", reference=5), run_index=0, seed=0)
        result = asyncio.run(execute_run(spec, cfg, get_benchmark("arith")))
    finally:
        TRACE_PROCESSORS.unregister("test_broken")
    assert result.status == "finished" and result.error is None and spec.paths.trace.read_text()

def test_a_registered_conformal_method_is_calibrated_and_predicted_like_a_built_in_one():
    import numpy as np

    @CONFORMAL_METHODS.register("test_first_half")
    def first_half(s, agg, u=1.0):  # steps of the first half in every set, the rest never
        return np.array([0.0 if i < len(s) / 2 else 2.0 for i in range(len(s))])

    try:
        assert "test_first_half" in method_names()
        records = [ScoreRecord(id=f"r{i}", n_steps=4, step_scores=[0.1, 0.2, 0.3, 0.4], mistake_step=i % 2)
                   for i in range(10)]
        fitted = fit(records, "test_first_half", 0.2, Aggregator())
        assert fitted.q_hat == 0.0 and predict(fitted, records[0]).steps == (0, 1)
    finally:
        CONFORMAL_METHODS.unregister("test_first_half")
