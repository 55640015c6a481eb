"""The graph state every system shares: what a run carries from node to node (and into its checkpoints).

Each system's state extends one of these TypedDicts with its own keys (a
debate's ``round``, a supervisor's ``delegated``, ...). The reducers say how
parallel branches' updates merge: counters add up, notes and decisions
append, per-agent histories and environment logs merge by key.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from mas.topologies.environment import ActionLog, merge_logs
from mas.topologies.roles import merge_history


class RunState(TypedDict, total=False):
    """Keys every system's state has."""

    steps_done: Annotated[int, operator.add]
    """Trajectory steps emitted so far (a resumed run restarts its step counter here)."""
    notes: Annotated[list[str], operator.add]
    """Notes added on rollback (shown to the agents)."""
    envs: Annotated[dict[str, ActionLog], merge_logs]
    """Environment branches as action logs, on benchmarks solved by acting (each system names its branches)."""
    answer: dict[str, Any] | None
    """The run's final answer (``answer_artifact``, ``confidence``, ...); None until there is one."""


class LoopState(RunState, total=False):
    """Keys of every multi-agent system: per-agent artifacts, the controller's decisions, the outcome."""

    history: Annotated[dict[str, list[dict[str, Any]]], merge_history]
    """Per agent: its artifact of every round or cycle."""
    decisions: Annotated[list[dict[str, Any]], operator.add]
    """The termination controller's decisions, one per round."""
    outcome: str
    """The environment branch that is the run's outcome (see benchmark/README.md)."""
    stages: list[dict[str, Any]]
    """Per looped stage: rounds used, stop reason, consensus."""
