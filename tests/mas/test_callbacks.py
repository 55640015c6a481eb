"""LangChain callback handlers see every model call nested under its graph node and the run (issue 23).

Langfuse's LangChain integration attaches its handler to the graph
(``graph.ainvoke(..., config={"callbacks": [handler]})``); LangSmith's tracer
is registered globally (a configure hook). Either way a model call must
reach the handler as a child of the node that made it, inside the graph run,
with the run id whose low 64 bits are the call's span id in the JSONL trace.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook

from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from mas.config import ExperimentConfig, ModelRoute
from mas.llm.models import ModelSet
from mas.otel.mapping import is_model_event
from mas.sweep.experiment import ExperimentRequest, plan_runs, validate_request
from mas.sweep.runner import execute_run, run_graph
from mas.topologies.agent import RunContext
from mas.tracing import ListCollector, Tracer


class Recorder(BaseCallbackHandler):
    """Keeps every chain and chat model run it is told about."""

    def __init__(self) -> None:
        self.chains: dict[UUID, dict[str, Any]] = {}
        self.chats: list[dict[str, Any]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       metadata: dict[str, Any] | None = None, **kw: Any) -> None:
        self.chains[run_id] = {"parent": parent_run_id, "name": kw.get("name"), "metadata": metadata or {}}

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                            metadata: dict[str, Any] | None = None, **kw: Any) -> None:
        self.chats.append({"run_id": run_id, "parent": parent_run_id, "metadata": metadata or {}})

    def root_of(self, run_id: UUID) -> UUID:
        while (parent := self.chains[run_id]["parent"]) is not None:
            run_id = parent
        return run_id


def _scripted() -> ExperimentConfig:
    # scripted:judge: the double also plays the judge (plain "scripted" is mock mode, which calls no judge)
    return ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted:judge")})


def _check(rec: Recorder, events: list, root: UUID) -> None:
    calls = {e.span_id for e in events if is_model_event(e) or e.event_type == "tool_call"}
    assert len(rec.chats) == len(calls) > 0  # every model call, judge calls included
    assert {c["run_id"].hex[16:] for c in rec.chats} == calls  # the trace's chat span ids are the handler's run ids
    for chat in rec.chats:
        node = rec.chains.get(chat["parent"])
        assert node is not None, "a model call without its parent run"
        assert node["metadata"].get("langgraph_node") == node["name"], node  # a graph node, not an inner runnable
        assert node["parent"] == root and rec.root_of(chat["parent"]) == root
        assert chat["metadata"].get("langgraph_node") == node["name"]  # the node's metadata is inherited
        assert chat["metadata"]["contract"]  # and call_llm's is added
    nodes = {rec.chains[c["parent"]]["name"] for c in rec.chats}
    assert {"debater", "controller", "vote"} <= nodes


def test_a_handler_attached_to_the_graph_sees_every_model_call_under_its_node(tmp_path):
    cfg = _scripted()
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=0), question="What is 6 * 7?", answer_kind="number")
    collected = ListCollector()
    tracer = Tracer("callbacks/debate", [collected])
    rec = Recorder()
    config = {"configurable": {"thread_id": "t"}, "callbacks": [rec]}
    state, error, _own = asyncio.run(run_graph("debate", rt, tmp_path / "cp.sqlite", tracer, config=config))
    assert error is None and state["answer"]
    assert tracer.root in rec.chains and rec.chains[tracer.root]["parent"] is None  # the graph run is the root span
    _check(rec, collected.events, tracer.root)


_global: ContextVar[Recorder | None] = ContextVar("test_global_handler", default=None)
register_configure_hook(_global, inheritable=True)


@pytest.mark.parametrize("system", ["debate"])
def test_a_globally_registered_handler_sees_every_model_call_with_its_parent_run(tmp_path, system):
    cfg = _scripted().model_copy(update={"output_root": str(tmp_path)})
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=[system], task_limit=1, runs_per_task=1,
                            experiment_id="g", progress="none")
    spec = plan_runs(req, validate_request(req))[0]
    rec = Recorder()
    token = _global.set(rec)
    try:
        asyncio.run(execute_run(spec, cfg, get_benchmark("arith", None)))
    finally:
        _global.reset(token)
    events = read_trace(spec.paths.trace)
    root = next(r for r, c in rec.chains.items() if c["parent"] is None and c["name"] == "LangGraph")
    assert root.hex == __import__("json").loads(spec.paths.metadata.read_text())["otel_trace_id"]
    _check(rec, events, root)


def test_a_model_call_adds_no_handler_and_its_run_id_is_the_traced_chat_span():
    # A handler of the project's own on every call made LangChain run its callback machinery per call (issue 33).
    from langchain_core.messages import HumanMessage

    from mas.spans import span_hex
    from mas.tracing import call_config, use_tracer

    tracer = Tracer("no-handlers", [], record_inputs=True)
    with use_tracer(tracer):
        config = call_config({"contract": "x"}, [HumanMessage("hi")])
    assert "callbacks" not in config and config["metadata"] == {"contract": "x"}
    span_id, inputs = tracer.chat_spans.claim(None)
    assert span_id == span_hex(config["run_id"]) and [m.content for m in inputs] == ["hi"]
