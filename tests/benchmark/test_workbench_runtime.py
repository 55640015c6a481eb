"""WorkBench in the runtime: environment tools for every system, state through checkpoints and rollback,
side effects on forks, and the scripted double replaying (and corrupting) the reference actions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from attribution.sources.loaders import load_run
from attribution.rollback.restart import rollback_note, superstep_start
from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from descriptor.layout import RunKey
from descriptor.run_files import read_result
from mas.config import parse_config
from mas.sweep.experiment import ExperimentRequest, run_experiment
from mas.sweep.runner import RunSpec, execute_run, resume_run
from mas.systems import SYSTEMS

TASKS = 6


def config(tmp_path: Path, model: str = "scripted", **sections):
    return parse_config({"output_root": str(tmp_path), "models": {"default": {"provider": "scripted", "model": model}},
                         **sections})


def sweep(tmp_path: Path, experiment_id: str, **sections):
    cfg = config(tmp_path, **sections)
    req = ExperimentRequest(cfg=cfg, benchmarks=["workbench"], systems=list(SYSTEMS), task_limit=TASKS,
                            runs_per_task=1, experiment_id=experiment_id, progress="none")
    return asyncio.run(run_experiment(req)), tmp_path / experiment_id


def trace_of(root: Path, r) -> list:
    key = RunKey(experiment_id=root.name, benchmark=r.benchmark, system=r.system, task_id=r.task_id,
                 run_index=r.run_index, seed=r.seed)
    return read_trace(key.paths(root).trace)


@pytest.fixture(scope="module")
def clean_sweep(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("wb"), "clean")


@pytest.fixture(scope="module")
def injected_sweep(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("wbi"), "injected", inject={"rate": 1.0})


def test_a_scripted_sweep_of_every_system_acts_on_workbench_and_succeeds(clean_sweep):
    results, root = clean_sweep
    tasks = {t.task_id: t for t in get_benchmark("workbench").load_tasks(TASKS)}
    assert len(results) == TASKS * len(SYSTEMS) and {r.system for r in results} == set(SYSTEMS)
    assert all(r.status == "finished" and r.success for r in results)
    acting = [r for r in results if tasks[r.task_id].reference["answer"]]
    assert acting and len(acting) < len(results)  # some tasks expect actions, some expect none
    for r in acting:
        events = trace_of(root, r)
        calls = [e for e in events if e.event_type == "tool_call"]
        changed = [e for e in events if e.event_type == "tool_result" and e.payload.state_changing]
        assert calls and changed, (r.system, r.task_id)
        # the agents' calls (the supervisor's handoffs are routing calls; the aggregator's merges are not steps)
        used = {e.payload.tool for e in calls if e.step_index is not None} - {"delegate"}
        assert used and all("__" in t for t in used)  # WorkBench's tools, not the calculator
        details = json.loads((RunKey(experiment_id="clean", **{k: getattr(r, k) for k in (
            "benchmark", "system", "task_id", "run_index", "seed")}).paths(root).eval).read_text())["details"]
        assert details["outcome_match"] and details["changed_tables"] and not details["side_effects"]


def test_parallel_agents_act_on_their_own_forks_and_the_outcome_is_one_of_them(clean_sweep):
    results, root = clean_sweep
    tasks = {t.task_id: t for t in get_benchmark("workbench").load_tasks(TASKS)}
    for r in results:
        expected = len(tasks[r.task_id].reference["answer"])
        if r.system != "debate" or not expected:
            continue
        events = trace_of(root, r)
        by_agent = {}
        for e in events:
            if e.event_type == "tool_result" and e.payload.state_changing:
                by_agent.setdefault(e.actor, 0)
                by_agent[e.actor] += 1
        # every debater made every change on its own environment; the run's outcome holds them once
        assert by_agent == {f"debater_{i}": expected for i in range(3)}
        final = events[-1]
        assert final.payload.outcome_environment == final.payload.source_agent


def test_injected_errors_are_the_decisive_steps_of_the_failed_runs(injected_sweep):
    results, root = injected_sweep
    failed = [r for r in results if not r.success]
    assert failed and {r.status for r in failed} == {"finished"}
    reference = {t.task_id: get_benchmark("workbench").reference_actions(t)
                 for t in get_benchmark("workbench").load_tasks(TASKS)}
    for r in failed:
        key = RunKey(experiment_id=root.name, benchmark=r.benchmark, system=r.system, task_id=r.task_id,
                     run_index=r.run_index, seed=r.seed)
        traj = load_run(key.paths(root).task_dir, r.run_index)
        step = traj.mistake_step
        assert step is not None, (r.system, r.task_id)
        events = read_trace(key.paths(root).trace)
        injected = next(e for e in events if e.step_index == step)
        if injected.event_type == "tool_call" and injected.payload.tool != "delegate":
            # an altered action: no reference action has these arguments
            wanted = [a.args for a in reference[r.task_id]]
            assert injected.payload.arguments not in wanted
        # decisive: resumed from that step with the injection spent, the run succeeds
        restart = superstep_start(traj, step)
        outcome = await_(resume_run(key.paths(root), checkpoint_id=traj.steps[restart].state_id,
                                    note=rollback_note(traj, restart), rollback_index=0, first_step=restart))
        assert outcome.error is None and outcome.success, (r.system, r.task_id, step)


def await_(coro):
    return asyncio.run(coro)


async def test_rollback_replays_the_environment_up_to_the_checkpoint(tmp_path):
    """A two-action task with its second action corrupted: resuming at that step keeps the first action."""
    bench = get_benchmark("workbench")
    task = next(t for t in bench.load_tasks(40) if len(t.reference["answer"]) == 2)
    cfg = config(tmp_path, inject={"agent": "solver", "step": 1})
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="workbench", system="sas", task=task,
                   run_index=0, seed=0)
    result = await execute_run(spec, cfg, bench)
    meta = json.loads(spec.paths.metadata.read_text())
    assert not result.success and meta["injected_error"] == {"agent": "solver", "step": 1}
    traj = load_run(spec.paths.task_dir, 0)
    outcome = await resume_run(spec.paths, checkpoint_id=traj.steps[1].state_id, note=rollback_note(traj, 1),
                               rollback_index=0, first_step=1)
    assert outcome.success and outcome.error is None
    redone = [e for e in read_trace(outcome.paths.trace) if e.event_type == "tool_call"]
    # only the second action is redone: the first one comes back from the checkpoint's action log
    assert len(redone) == 1 and redone[0].step_index == 1 and redone[0].payload.redo is True
    details = json.loads(outcome.paths.eval.read_text())["details"]
    assert details["tool_calls"] == 2 and details["exact_action_match"]


async def test_domain_tools_refuse_other_domains_as_a_failed_call(tmp_path, scripted_provider):
    bench = get_benchmark("workbench", {"tools": "domain"})
    task = next(t for t in bench.load_tasks(40) if t.metadata["domains"] == ["analytics"])

    def respond(ctx):
        if "tools" in ctx.kwargs and not any(isinstance(m, AIMessage) for m in ctx.messages):
            assert "email__send_email" not in ctx.kwargs["tools"]  # only the task's domain (and the directory)
            return AIMessage(content="", tool_calls=[{"name": "email__send_email", "id": "c1",
                                                      "args": {"recipient": "a@b.co", "subject": "s", "body": "b"}}])
        return json.dumps({"reasoning": "", "answer_artifact": "gave up", "confidence": 0.1})

    cfg = config(tmp_path, benchmarks={"workbench": {"tools": "domain"}})
    cfg = cfg.model_copy(update={"models": {"default": cfg.models["default"].model_copy(
        update={"provider": scripted_provider({"agent.turn": respond})})}})
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="workbench", system="sas", task=task,
                   run_index=0, seed=0)
    result = await execute_run(spec, cfg, bench)
    assert result.status == "finished" and result.error is None
    failed = [e for e in read_trace(spec.paths.trace) if e.event_type == "tool_result"]
    assert len(failed) == 1 and failed[0].payload.ok is False and "this task's tools are" in failed[0].payload.output


@pytest.mark.parametrize("system", ["sas", "debate"])
async def test_text_protocol_tool_calls_reach_the_environment(tmp_path, system):
    bench = get_benchmark("workbench")
    task = next(t for t in bench.load_tasks(20) if t.reference["answer"])
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="workbench", system=system, task=task,
                   run_index=0, seed=0)
    result = await execute_run(spec, config(tmp_path, "scripted:text-tools"), bench)
    calls = [e for e in read_trace(spec.paths.trace) if e.event_type == "tool_call"]
    assert result.success and calls and {e.payload.tool_protocol for e in calls} == {"text"}
    assert read_result(spec.paths).status == "finished"


def test_the_text_protocol_describes_the_environment_tools(tmp_path):
    from mas.llm.models import ModelSet
    from mas.topologies.agent import RunContext, opening_messages
    from mas.topologies.sas import SOLVER

    bench = get_benchmark("workbench", {"tools": "domain"})
    task = next(t for t in bench.load_tasks(40) if t.metadata["domains"] == ["calendar"])
    cfg = config(tmp_path)
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=0), question=task.question, answer_kind="actions",
                    new_environment=lambda: bench.make_environment(task))
    system = str(opening_messages(rt, SOLVER, toolbox=rt.toolbox(rt.new_environment()))[0].content)
    assert "- calendar__delete_event: " in system and '"event_id"' in system and "email__" not in system
    assert "calculator" not in system and "Only the changes your tool calls make are graded" in system


def test_the_aggregator_merges_only_the_state_changes_of_accepted_parts():
    from mas.topologies.decomposition import merge_parts, part_changes
    from mas.topologies.environment import MAIN, log_of, replay
    from mas.topologies.orchestrator import AGGREGATOR
    from mas.tracing import ListCollector, Tracer, use_tracer

    bench = get_benchmark("workbench")
    task = bench.load_tasks(1)[0]
    new = lambda: bench.make_environment(task)  # noqa: E731
    base = replay(new, [{"name": "calendar.delete_event", "args": {"event_id": "00000256"}, "ok": True}])
    worker = replay(new, log_of(base))
    worker.call("company_directory.find_email_address", {"name": "nadia"})  # a look-up: not part of the outcome
    worker.call("email.delete_email", {"email_id": "00000001"})
    worker.call("email.delete_email", {"email_id": "99999999"})  # refused: no change to merge
    envs = {MAIN: log_of(base), "worker_0": log_of(worker)}
    assert [c["name"] for c in part_changes(envs, "worker_0", base)] == ["email.delete_email"]
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        merge_parts(AGGREGATOR, base, [("worker_0", part_changes(envs, "worker_0", base))], None)
    assert [(a.name, a.ok) for a in base.actions] == [("calendar.delete_event", True), ("email.delete_email", True)]
    assert [e.event_type for e in sink.events] == ["tool_call", "tool_result"]
    assert sink.events[1].payload.state_changing and sink.events[0].payload.content == "apply worker_0's change"
