"""The systems a run can use, by name: the SAS and the multi-agent topologies.

Each entry builds an uncompiled LangGraph ``StateGraph`` for one run; every
graph leaves its final answer in ``state["answer"]`` and its per-stage
metrics (rounds used, stop reasons) in ``state["stages"]``. Adding a
topology is one module under :mod:`mas.topologies` plus one line here.

Routing functions (conditional edges) are ``async def`` like the nodes:
LangGraph runs a plain ``def`` one in a thread pool on every step, and
those hand-offs cost a sweep of 16 concurrent runs about 3 % efficiency.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import StateGraph

from mas.topologies.agent import RunContext
from mas.topologies.debate import build_debate
from mas.topologies.orchestrator import build_orchestrator
from mas.topologies.sas import build_sas
from mas.topologies.supervisor import build_supervisor

SystemBuilder = Callable[[RunContext], StateGraph]

SYSTEMS: dict[str, SystemBuilder] = {
    "sas": build_sas,
    "supervisor": build_supervisor,
    "debate": build_debate,
    "orchestrator": build_orchestrator,
}


def final_answer(state: dict[str, Any]) -> str | None:
    """The answer artifact a finished graph left, or None (also for an empty one: no answer was produced, so the
    run is not completed, whichever topology picked it)."""
    ans = state.get("answer")
    if not ans:
        return None
    art = ans.get("answer_artifact")
    return None if art is None or not str(art).strip() else str(art)


def stage_metrics(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-stage metrics of looped stages (empty for the SAS)."""
    return list(state.get("stages") or [])
