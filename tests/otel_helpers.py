"""Shared by the OpenTelemetry tests: scripted sweeps and what their traces and exported spans must show."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from descriptor.events import read_trace
from mas.config import ExperimentConfig, ModelRoute, TracingSettings
from mas.sweep.experiment import ExperimentRequest, run_experiment

HEX16 = re.compile(r"^[0-9a-f]{16}$")
SYSTEMS = ["sas", "supervisor", "debate", "orchestrator"]


def scripted_sweep(root: Path, *, systems: list[str] = SYSTEMS, tasks: int = 1, runs: int = 1, exp: str = "x",
                   tracing: TracingSettings | None = None, inject: float = 0.0) -> Path:
    cfg = ExperimentConfig(output_root=str(root), seed=3,
                           models={"default": ModelRoute(provider="scripted", model="scripted")},
                           tracing=tracing or TracingSettings())
    if inject:
        cfg = cfg.model_copy(update={"inject": cfg.inject.model_copy(update={"rate": inject})})
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=systems, task_limit=tasks, runs_per_task=runs,
                            experiment_id=exp, progress="none")
    asyncio.run(run_experiment(req))
    return root / exp


def runs_of(experiment: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(trace path, metadata) of every run under ``experiment``."""
    out = []
    for trace in sorted(experiment.rglob("run_*.trace.jsonl")):
        meta = json.loads(trace.with_name(trace.name.replace(".trace.jsonl", ".metadata.json")).read_text())
        out.append((trace, meta))
    return out


def jsonl_tokens(trace: Path) -> tuple[int, int]:
    events = read_trace(trace)
    return sum(e.token_in for e in events), sum(e.token_out for e in events)


def check_tree(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """One trace's spans (dicts with span_id, parent_span_id, name): one root, every parent inside the trace,
    chat and execute_tool spans under agent spans under the root. Returns the root."""
    by_id = {s["span_id"]: s for s in spans}
    assert len(by_id) == len(spans), "span ids repeat"
    roots = [s for s in spans if not s["parent_span_id"]]
    assert len(roots) == 1, [s["name"] for s in roots]
    root = roots[0]
    assert root["name"].startswith("invoke_workflow ")
    for s in spans:
        if s is root:
            continue
        parent = by_id.get(s["parent_span_id"])
        assert parent is not None, f"{s['name']}: parent {s['parent_span_id']} is not in the trace"
        kind = s["name"].split()[0]
        if kind == "invoke_agent":
            assert parent is root, s["name"]
        else:
            assert kind in ("chat", "execute_tool"), s["name"]
            assert parent is root or parent["name"].startswith("invoke_agent "), (s["name"], parent["name"])
    return root


def chat_token_sums(spans: list[dict[str, Any]]) -> tuple[int, int]:
    chats = [s for s in spans if s["name"].split()[0] == "chat"]
    return (sum(int(s["attributes"].get("gen_ai.usage.input_tokens", 0)) for s in chats),
            sum(int(s["attributes"].get("gen_ai.usage.output_tokens", 0)) for s in chats))


def by_trace(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in spans:
        out[s["trace_id"]].append(s)
    return out


def kinds(spans: list[dict[str, Any]]) -> Counter[str]:
    return Counter(s["name"].split()[0] for s in spans)
