"""Per-run overhead without losing what rollback needs: graphs compiled once, checkpoints on disk only when kept."""

from __future__ import annotations

import threading
from pathlib import Path

import aiosqlite
from langgraph.graph.state import StateGraph

from attribution.sources.loaders import load_run
from attribution.rollback.restart import rollback_note, superstep_start
from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from mas.config import parse_config
from mas.sweep.checkpoints import PACKED_SUFFIX
from mas.sweep.runner import RunSpec, execute_run, resume_run


def config(**sections):
    return parse_config({"models": {"default": {"provider": "scripted", "model": "scripted"}}, **sections})


def spec(tmp_path, system, task_index, experiment="e"):
    task = get_benchmark("arith", None).load_tasks(task_index + 1, seed=0)[task_index]
    return RunSpec(experiment_id=experiment, output_root=Path(tmp_path), benchmark="arith", system=system, task=task,
                   run_index=0, seed=0)


async def test_with_the_default_policy_only_a_failed_run_writes_checkpoints_and_they_resume_after_a_crash(
        tmp_path, monkeypatch):
    opened: list[str] = []
    connect = aiosqlite.connect
    monkeypatch.setattr(aiosqlite, "connect", lambda db, *a, **k: (opened.append(str(db)), connect(db, *a, **k))[1])
    bench = get_benchmark("arith", None)
    ok = spec(tmp_path, "sas", 0)
    assert (await execute_run(ok, config(), bench)).success
    packed = ok.paths.checkpoints.with_name(ok.paths.checkpoints.name + PACKED_SUFFIX)
    assert not ok.paths.checkpoints.exists() and not packed.exists()
    assert not any("checkpoints" in p for p in opened)  # not even for a while

    failed_cfg = config(inject={"agent": "solver", "step": 1})
    failed = spec(tmp_path, "sas", 1)
    assert not (await execute_run(failed, failed_cfg, bench)).success
    # a crash right before result.json: the next sweep redoes the run from scratch
    failed.paths.result.unlink()
    kept = failed.paths.checkpoints.with_name(failed.paths.checkpoints.name + PACKED_SUFFIX)  # gzipped at the end
    kept.unlink()
    assert not (await execute_run(failed, failed_cfg, bench)).success
    assert kept.is_file() and not failed.paths.checkpoints.exists()
    traj = load_run(failed.paths.task_dir, 0)
    j = traj.mistake_step
    outcome = await resume_run(failed.paths, checkpoint_id=traj.steps[j].state_id, note=rollback_note(traj, j),
                               rollback_index=0, first_step=superstep_start(traj, j))
    assert outcome.success and outcome.error is None


async def test_runs_of_one_shape_share_one_compiled_graph_and_another_shape_gets_its_own(tmp_path, monkeypatch):
    compiled: list[str] = []
    compile_ = StateGraph.compile
    monkeypatch.setattr(StateGraph, "compile", lambda self, *a, **k: (compiled.append("x"), compile_(self, *a, **k))[1])
    bench = get_benchmark("arith", None)
    debaters = []
    for i, agents in enumerate((3, 3, 2, 3)):
        s = spec(tmp_path, "debate", i, f"run{i}")
        result = await execute_run(s, config(mas={"agents": agents}), bench)
        assert result.success and result.answer == str(s.task.reference)  # each run answers its own question
        debaters.append(len({e.actor for e in read_trace(s.paths.trace) if e.actor.startswith("debater_")}))
    assert debaters == [3, 3, 2, 3]
    assert len(compiled) <= 2  # one per shape (none when an earlier test of this process compiled it already)


async def test_a_benchmark_whose_evaluation_may_block_is_evaluated_off_the_event_loop_and_a_quick_one_on_it(
        tmp_path):
    arith = type(get_benchmark("arith", None))
    threads: list[tuple[str, bool]] = []

    class Recording(arith):  # type: ignore[misc, valid-type]
        def evaluate(self, task, answer, environment=None):
            threads.append((type(self).__name__, threading.current_thread() is threading.main_thread()))
            return super().evaluate(task, answer, environment)

    class Blocking(Recording):
        evaluation_blocks = True

    class Quick(Recording):
        evaluation_blocks = False

    assert arith.evaluation_blocks is False and get_benchmark("scicode", None).evaluation_blocks is True
    for i, bench in enumerate((Blocking(), Quick())):
        s = spec(tmp_path, "sas", i, f"e{i}")
        result = await execute_run(s, config(), bench)
        assert result.success and s.paths.result.is_file()
        traj = load_run(s.paths.task_dir, 0)
        assert traj.steps  # the files written after the evaluation are all there either way
    assert threads == [("Blocking", False), ("Quick", True)]

    # A run with an environment has its actions replayed for the evaluation: off the loop even when the adapter
    # says its own evaluation does not block.
    workbench = type(get_benchmark("workbench", None))

    class QuickWithEnvironment(workbench):  # type: ignore[misc, valid-type]
        evaluation_blocks = False

        def evaluate(self, task, answer, environment=None):
            threads.append((type(self).__name__, threading.current_thread() is threading.main_thread()))
            return super().evaluate(task, answer, environment)

    bench = QuickWithEnvironment()
    task = bench.load_tasks(1)[0]
    s = RunSpec(experiment_id="wb", output_root=Path(tmp_path), benchmark="workbench", system="sas", task=task,
                run_index=0, seed=0)
    assert (await execute_run(s, config(), bench)).success
    assert threads[-1] == ("QuickWithEnvironment", False)
