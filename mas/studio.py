"""The systems as LangGraph Studio / ``langgraph dev`` graphs: the task and the settings come at run time.

``langgraph.json`` at the project root names one factory per system (``sas``,
``supervisor``, ``debate``, ``orchestrator``, ``representative_exchange``; a test keeps it equal to
:data:`mas.systems.SYSTEMS`). This module has a factory for every registered system, installed packages'
and the plugins of ``$MAS_CONFIG`` included; ``python main.py studio-config`` writes a ``langgraph.json``
naming them all (:func:`langgraph_spec`). The LangGraph server calls a
factory for every run with the run's config, so each run gets its own
models and its own :class:`~mas.topologies.agent.RunContext`:

- **input**: ``{"question": "...", "answer_kind": "text"}`` (``answer_kind``
  optional: ``text``, ``number``, ``code``, ...), or a benchmark's task by id,
  ``{"benchmark": "arith", "task_id": "arith_0_0000"}`` (its question, answer
  kind and environment, and the task's fields for the scripted double, which
  plays a task from them and never from a typed question);
- **settings** (the assistant's or run's ``configurable``): ``model`` (a route:
  ``scripted``, ``embedded`` or a ``[models.NAME]`` of the config file),
  ``config`` (an experiment TOML; default ``$MAS_CONFIG``, else the built-in
  defaults, whose model is ``embedded``), ``set`` (``{"mas.agents": 2, ...}``,
  like ``--set``) and ``seed``.

The graph is ``task`` (reads the input into the run context) followed by the
system's own graph as a subgraph, so Studio draws the topology and keeps its
checkpoints (``checkpoint_ns`` ``<system>:<task id>``); the final answer is
in the output's ``answer``. A fork from a checkpoint inside the subgraph
skips ``task``: give the question in ``configurable.question`` as well to
fork there. Runs here write no JSONL trace; their model calls reach the
server's LangChain callbacks (LangSmith) like any LangGraph app's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from benchmark.registry import BENCHMARKS
from descriptor.suggest import unknown_name
from mas.config import ConfigError, ExperimentConfig, load_config
from mas.overrides import apply_overrides
from mas.llm.models import ModelSet
from mas.sweep.benchmarks import run_benchmark
from mas.sweep.runner import run_context
from mas.systems import SYSTEMS
from mas.topologies.agent import RunContext

if os.environ.get("MAS_CONFIG"):  # its plugins register their systems before the factories below are made
    load_config(os.environ["MAS_CONFIG"])

__all__ = ["StudioInput", "build_studio_graph", "langgraph_spec", "studio_settings", *SYSTEMS]


class StudioInput(TypedDict):
    question: NotRequired[str]
    answer_kind: NotRequired[str]
    benchmark: NotRequired[str]
    """With ``task_id``: run that task of this benchmark (options from the config) instead of a question."""
    task_id: NotRequired[str]


class StudioOutput(TypedDict, total=False):
    answer: dict[str, Any] | None
    """``answer_artifact``, ``confidence``, ``reasoning``, ... of the system's final answer."""
    stages: list[dict[str, Any]]


class StudioState(StudioInput, StudioOutput, total=False):
    pass


def studio_settings(config: RunnableConfig | None) -> tuple[ExperimentConfig, int]:
    """The experiment config and seed of a run, from its ``configurable`` (see the module docstring)."""
    conf = (config or {}).get("configurable") or {}
    cfg = load_config(conf.get("config") or os.environ.get("MAS_CONFIG") or None)
    overrides = conf.get("set") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"configurable.set: expected an object of dotted keys, got {overrides!r}")
    cfg = apply_overrides(cfg, model=conf.get("model"), **{str(k): v for k, v in overrides.items()})
    seed = conf.get("seed", cfg.seed)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"configurable.seed: expected an integer, got {seed!r}")
    return cfg, seed


def benchmark_run(cfg: ExperimentConfig, seed: int, state: StudioInput) -> RunContext:
    """The run context of the benchmark task the input names (``benchmark``, ``task_id``), as a sweep's run of it
    would have; ValueError naming the input field when there is no such benchmark or task."""
    name, task_id = state.get("benchmark"), state.get("task_id")
    if not isinstance(name, str) or name not in BENCHMARKS:
        raise ValueError(f"input.benchmark: expected a registered benchmark ({', '.join(BENCHMARKS.names())}), "
                         f"got {name!r}")
    bench = run_benchmark(cfg, name)
    task = next((t for t in bench.load_tasks() if t.task_id == task_id), None)
    if task is None:
        raise ValueError(f"input.task_id: {name} has no task {task_id!r} (its first: "
                         f"{', '.join(t.task_id for t in bench.load_tasks(limit=3))})")
    return run_context(cfg, bench, task, seed=seed, injection=None)


def build_studio_graph(system: str, config: RunnableConfig | None = None) -> CompiledStateGraph:
    """``system``'s graph for one run: ``task`` then the system as a subgraph (input :class:`StudioInput`)."""
    if system not in SYSTEMS:
        raise ConfigError(unknown_name("system", system, sorted(SYSTEMS)))
    cfg, seed = studio_settings(config)
    conf = (config or {}).get("configurable") or {}
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=seed), question=str(conf.get("question") or ""))

    async def task(state: StudioInput) -> dict[str, Any]:
        if state.get("benchmark") is not None or state.get("task_id") is not None:
            played = benchmark_run(cfg, seed, state)
            rt.question, rt.answer_kind, rt.new_environment = played.question, played.answer_kind, played.new_environment
            rt.models = played.models
            return {"question": rt.question, "answer_kind": rt.answer_kind}
        question = state.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"input.question: expected a non-empty string, got {question!r}")
        rt.question = question
        rt.answer_kind = str(state.get("answer_kind") or "text")
        return {"question": question, "answer_kind": rt.answer_kind}

    g = StateGraph(StudioState, input_schema=StudioInput, output_schema=StudioOutput)
    g.add_node("task", task)
    g.add_node(system, SYSTEMS[system].build(rt).compile())
    g.add_edge(START, "task")
    g.add_edge("task", system)
    g.add_edge(system, END)
    return g.compile(name=system)


def _factory(system: str) -> Callable[[RunnableConfig], CompiledStateGraph]:
    def factory(config: RunnableConfig) -> CompiledStateGraph:
        return build_studio_graph(system, config)

    factory.__name__ = factory.__qualname__ = system
    factory.__doc__ = f"The ``{system}`` system for LangGraph Studio (input: question; settings: configurable)."
    return factory


globals().update({name: _factory(name) for name in SYSTEMS})


def langgraph_spec() -> dict[str, Any]:
    """``langgraph.json`` for the project root: a graph for every registered system (plugins' included).

    >>> langgraph_spec()["graphs"]["sas"]
    './mas/studio.py:sas'
    """
    return {"$schema": "https://langgra.ph/schema.json", "dependencies": ["."],
            "graphs": {name: f"./mas/studio.py:{name}" for name in SYSTEMS}}
