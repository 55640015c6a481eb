"""The topology kit: a new topology is one module importing the runtime from one place, plus its registration.

The example is ``round_robin`` from ``examples/plugin`` (the speakers answer in turn under one controller),
registered here by a fixture, not shipped as one of the project's systems.
"""

from __future__ import annotations

import ast
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from mas.config import parse_config
from mas.sweep.runner import RunSpec, execute_run
from mas.systems import SYSTEMS
from mas.topologies.kit import StageRecord

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugin"
MODULE = PLUGIN / "mas_econ_example" / "round_robin.py"
PROJECT = ("descriptor", "benchmark", "mas", "attribution")


def project_imports(path: Path) -> set[str]:
    """The project modules ``path`` imports anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return {m for m in found if m.split(".")[0] in PROJECT}


@pytest.fixture
def round_robin() -> Iterator[str]:
    """``round_robin`` registered for this test (its module imported as a plugin would be), unregistered after."""
    sys.path.insert(0, str(PLUGIN))
    sys.modules.pop("mas_econ_example.round_robin", None)
    try:
        importlib.import_module("mas_econ_example.round_robin")
        yield "round_robin"
    finally:
        SYSTEMS.unregister("round_robin")
        sys.modules.pop("mas_econ_example.round_robin", None)
        sys.path.remove(str(PLUGIN))


def test_a_new_topology_imports_the_runtime_from_the_kit_alone():
    assert project_imports(MODULE) == {"mas.topologies.kit"}


async def test_round_robin_runs_and_finish_loop_writes_its_closing_records(round_robin, tmp_path):
    cfg = parse_config({"models": {"default": {"provider": "scripted", "model": "scripted"}}})
    bench = get_benchmark("arith", None)
    task = bench.load_tasks(1, seed=0)[0]
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system=round_robin, task=task,
                   run_index=0, seed=0)
    result = await execute_run(spec, cfg, bench)
    assert result.success and result.error is None
    events = read_trace(spec.paths.trace)
    answers = [e.actor for e in events if e.event_type in ("act", "revise")]
    assert answers[:3] == ["speaker_0", "speaker_1", "speaker_2"]  # in turn
    final = [e for e in events if e.event_type == "finalize"]
    assert len(final) == 1 and final[0].actor == "system:controller"
    assert final[0].payload.selection == "last_speaker" and final[0].payload.sends[0].to == "user"
    metrics = json.loads(spec.paths.trace_metrics.read_text(encoding="utf-8"))
    stage = metrics["stages"][0]
    assert stage["stage"] == "round_robin" and stage["winner_agent"] == final[0].payload.source_agent
    assert set(StageRecord.__dataclass_fields__) - {"extra"} <= set(stage)
    assert stage["decisions"] == sum(1 for e in events if e.actor == "system:controller" and e.event_type == "verify")


MAX_EXAMPLE_LINES = 80


def test_the_example_topology_stays_short():
    lines = MODULE.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_EXAMPLE_LINES, f"{MODULE.name} has {lines} lines (at most {MAX_EXAMPLE_LINES})"


def test_sends_are_the_agent_graphs_messages_from_one_participant():
    from mas.topologies.debate import agent_graph
    from mas.topologies.kit import CONTROLLER, JUDGE_ACTOR, MasSettings

    graph = agent_graph(MasSettings(agents=3))
    assert graph.sends("debater_1") == [{"from": "debater_1", "to": "debater_0"},
                                        {"from": "debater_1", "to": "debater_2"}]  # not to the tools
    assert graph.sends(CONTROLLER, "final vote") == [{"from": CONTROLLER, "to": JUDGE_ACTOR}]
    assert [s["to"] for s in graph.sends(CONTROLLER, "next round")] == ["debater_0", "debater_1", "debater_2"]
    assert graph.sends("nobody") == []


async def test_the_kit_names_the_running_nodes_checkpoint_without_being_told():
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    from descriptor.events import Decision
    from mas.topologies.kit import emit_decision, state_id_of
    from mas.tracing import ListCollector, Tracer, use_tracer

    seen: list[str | None] = []

    class S(TypedDict, total=False):
        n: int

    async def node(state: S, config) -> dict:
        seen.append(state_id_of(config))  # what a node had to pass by hand
        emit_decision(Decision(stage="s", round=0, max_rounds=1, min_rounds=0, stop=True, reason="max_rounds_reached",
                               reason_detail="x"))
        return {"n": 1}

    graph = StateGraph(S).add_node(node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        await graph.compile(checkpointer=InMemorySaver()).ainvoke({}, {"configurable": {"thread_id": "t"}})
    assert seen[0] is not None and [e.state_id for e in sink.events] == seen
    assert state_id_of() is None  # outside a node there is none
