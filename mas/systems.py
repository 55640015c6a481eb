"""The systems a run can use, by name: the SAS and the multi-agent topologies.

Each entry builds an uncompiled LangGraph ``StateGraph`` for one run; every
graph leaves its final answer in ``state["answer"]`` and its per-stage
metrics (rounds used, stop reasons) in ``state["stages"]``.

Routing functions (conditional edges) are ``async def`` like the nodes:
LangGraph runs a plain ``def`` one in a thread pool on every step, and
those hand-offs cost a sweep of 16 concurrent runs about 3 % efficiency.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from langgraph.graph import StateGraph

from mas.agent import RunContext
from mas.sas import build_sas

SystemBuilder = Callable[[RunContext], StateGraph]

SYSTEMS: dict[str, SystemBuilder] = {"sas": build_sas}

# Topologies register themselves when their module is present.
for _name, _module in (("supervisor", "mas.supervisor"), ("debate", "mas.debate"),
                       ("orchestrator", "mas.orchestrator")):
    try:
        SYSTEMS[_name] = importlib.import_module(_module).BUILDER
    except ModuleNotFoundError as _err:
        if _err.name != _module:
            raise


def final_answer(state: dict[str, Any]) -> str | None:
    """The answer artifact a finished graph left, or None."""
    ans = state.get("answer")
    if not ans:
        return None
    art = ans.get("answer_artifact")
    return None if art is None else str(art)


def stage_metrics(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-stage metrics of looped stages (empty for the SAS)."""
    return list(state.get("stages") or [])
