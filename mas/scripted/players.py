"""Which player the double puts on a run's task: a registry by benchmark name (never by the prompt's text).

The runner hands the double the benchmark's name and the task's structured fields as its per-run arguments
(``benchmark``, ``task``: the benchmark's own task record, ``Task.metadata``; ``oracle_actions``: the task's
reference actions on a benchmark solved by acting). Each player is the double's own code, in this package,
registered under its benchmark's name in :data:`PLAYERS` (an installed package adds the player of its own
benchmark through the entry-point group ``mas_econ.scripted_players``): a provider's behaviour lives in its
package, and ``benchmark/`` (a lower stage) cannot hold answers that need the runtime's message types. A
benchmark solved by acting without a player of its own gets WorkBench's, which replays any task's reference
actions; any other benchmark without one gets the double's valid but uninformed answers
(:func:`mas.scripted.replies.unplayed_turn`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from descriptor.registry import Registry


@dataclass(frozen=True, slots=True)
class TaskFields:
    """What the double is told of a run's task: its record and, on a benchmark solved by acting, its reference
    actions (each ``{"name", "args"}``)."""

    task: Mapping[str, Any] = field(default_factory=dict)
    oracle_actions: list[dict[str, Any]] | None = None


PlayerFactory = Callable[[TaskFields], Any]
"""``(task fields) -> player``, or None when the fields hold nothing to play (a player answers ``turn(ctx, role,
allowed)``, and may implement :class:`mas.scripted.orchestrator.Decomposer`)."""

PLAYERS: Registry[PlayerFactory] = Registry("scripted player", "mas_econ.scripted_players")
"""Benchmark name -> the factory of its player (the player modules of this package register theirs)."""

ACTING = "workbench"
"""The player of a benchmark solved by acting that has none of its own: WorkBench's replays any reference actions."""


def player_for(benchmark: str | None, task: Mapping[str, Any] | None,
               oracle_actions: list[dict[str, Any]] | None) -> Any:
    """The player of one run's task, or None (no benchmark named, or one the double does not play).

    >>> player_for("arith", {"start": 5, "ops": [["+", 2]]}, None)
    ArithPlayer(start=5, ops=[('+', 2)])
    >>> player_for("gsm8k", {}, None) is None
    True
    """
    fields = TaskFields(task=dict(task or {}), oracle_actions=oracle_actions)
    if benchmark is not None and benchmark in PLAYERS:
        return PLAYERS.get(benchmark)(fields)
    if oracle_actions is not None:  # a benchmark solved by acting: replay its reference actions
        return PLAYERS.get(ACTING)(fields)
    return None
