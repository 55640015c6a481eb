"""LangGraph Studio: ``langgraph.json`` serves every system; the task and settings come at run time."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from benchmark.registry import get_benchmark
from mas.config import ConfigError
from mas.studio import build_studio_graph
from mas.systems import SYSTEMS
from tests.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = {n for n in SYSTEMS if SYSTEMS.origin(n).startswith("mas.topologies.")}  # installed plugins' left out


def _arith_task():
    bench = get_benchmark("arith", {"count": 3})
    return bench, bench.load_tasks(limit=1)[0]


def test_langgraph_json_names_a_factory_for_every_system():
    spec = json.loads((ROOT / "langgraph.json").read_text())
    assert spec["dependencies"] == ["."]
    assert set(spec["graphs"]) == BUILT_IN
    import mas.studio

    assert set(mas.studio.langgraph_spec()["graphs"]) == set(SYSTEMS)  # studio-config writes plugins' too

    for name, ref in spec["graphs"].items():
        path, attr = ref.split(":")
        assert (ROOT / path).resolve() == Path(mas.studio.__file__).resolve() and attr == name
        assert callable(getattr(mas.studio, attr))


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_a_studio_graph_takes_a_benchmark_task_from_the_input(system):
    bench, task = _arith_task()
    config = {"configurable": {"model": "scripted", "thread_id": f"t-{system}", "set": {"mas.agents": 2}}}
    graph = build_studio_graph(system, config).copy(update={"checkpointer": InMemorySaver()})

    async def go():
        out = await graph.ainvoke({"benchmark": "arith", "task_id": task.task_id}, config)
        history = [s async for s in graph.aget_state_history(config)]
        return out, history

    out, history = asyncio.run(go())
    assert bench.evaluate(task, out["answer"]["answer_artifact"]).success  # the scripted model solved this task
    assert [h.next for h in reversed(history)][:3] == [("__start__",), ("task",), (system,)]


def test_studio_settings_are_checked():
    with pytest.raises(ConfigError, match="configurable.set"):
        build_studio_graph("debate", {"configurable": {"model": "scripted", "set": [1]}})
    with pytest.raises(ConfigError, match="unknown model route"):
        build_studio_graph("debate", {"configurable": {"model": "nope"}})
    with pytest.raises(ConfigError, match="unknown system"):
        build_studio_graph("nope", {"configurable": {"model": "scripted"}})
    graph = build_studio_graph("sas", {"configurable": {"model": "scripted"}})
    with pytest.raises(ValueError, match="input.question"):
        asyncio.run(graph.ainvoke({"question": "  "}))
    with pytest.raises(ValueError, match="input.benchmark: expected a registered benchmark"):
        asyncio.run(graph.ainvoke({"benchmark": "nope", "task_id": "x"}))
    with pytest.raises(ValueError, match="input.task_id: arith has no task 'arith_9'.*arith_0_0000"):
        asyncio.run(graph.ainvoke({"benchmark": "arith", "task_id": "arith_9"}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_langgraph_dev_serves_debate_and_its_checkpoint_history(tmp_path):
    pytest.importorskip("langgraph_api", reason="needs the [integrations] extra (langgraph-cli[inmem])")
    port = _free_port()
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
    log = open(tmp_path / "langgraph-dev.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "langgraph_cli", "dev", "--host", "127.0.0.1", "--port",
                             str(port), "--no-browser", "--no-reload", "--config", str(ROOT / "langgraph.json")],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=120) as c:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, (tmp_path / "langgraph-dev.log").read_text()[-3000:]
                try:
                    if c.get("/ok").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "langgraph dev did not answer within 120 s"
                time.sleep(0.5)
            graphs = {a["graph_id"] for a in c.post("/assistants/search", json={"limit": 50}).json()}
            assert graphs == BUILT_IN
            bench, task = _arith_task()
            thread = c.post("/threads", json={}).json()["thread_id"]
            run = c.post(f"/threads/{thread}/runs/wait", json={
                "assistant_id": "debate", "input": {"benchmark": "arith", "task_id": task.task_id},
                "config": {"configurable": {"model": "scripted"}}})
            assert run.status_code == 200, run.text
            answer = run.json()["answer"]
            assert bench.evaluate(task, answer["answer_artifact"]).success
            history = c.post(f"/threads/{thread}/history", json={"limit": 50}).json()
            assert [h["next"] for h in reversed(history)] == [["__start__"], ["task"], ["debate"], []]
            assert history[0]["values"]["answer"] == answer
            # the debate's own checkpoints, in the subgraph's namespace
            sub = next(t for h in history for t in h["tasks"] if t["name"] == "debate")
            inner = c.post(f"/threads/{thread}/history", json={
                "limit": 100, "checkpoint": {"checkpoint_ns": f"debate:{sub['id']}"}}).json()
            steps = [tuple(h["next"]) for h in reversed(inner)]
            assert steps[0] == ("__start__",) and steps[1] == ("debater", "debater", "debater")
            assert ("controller",) in steps and steps[-2:] == [("vote",), ()]
            assert inner[0]["values"]["answer"]["answer_artifact"] == answer["answer_artifact"]
    finally:
        stop_group(proc, timeout_s=20)
        log.close()
