"""Which player the double puts on a run's task: chosen by the benchmark's name (never by the prompt's text).

The runner hands the double the benchmark's name and the task's structured fields as its per-run arguments
(``benchmark``, ``task``: the benchmark's own task record, ``Task.metadata``; ``oracle_actions``: the task's
reference actions on a benchmark solved by acting). Each player is the double's own code, in this package: a
provider's behaviour lives in its package, and ``benchmark/`` (a lower stage) cannot hold answers that need
the runtime's message types. A benchmark without a player gets the double's valid but uninformed answers
(:func:`mas.scripted.replies.unplayed_turn`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mas.scripted.arith import ArithPlayer
from mas.scripted.browsecomp import BrowseCompPlayer
from mas.scripted.scicode import SciCodePlayer
from mas.scripted.workbench import ActingPlayer


def player_for(benchmark: str | None, task: Mapping[str, Any] | None,
               oracle_actions: list[dict[str, Any]] | None) -> Any:
    """The player of one run's task, or None (no benchmark named, or one the double does not play).

    >>> player_for("arith", {"start": 5, "ops": [["+", 2]]}, None)
    ArithPlayer(start=5, ops=[('+', 2)])
    >>> player_for("gsm8k", {}, None) is None
    True
    """
    if oracle_actions is not None:  # a benchmark solved by acting: replay its reference actions
        return BrowseCompPlayer.of(oracle_actions) if benchmark == "browsecomp" else ActingPlayer.of(oracle_actions)
    if benchmark == "arith":
        return ArithPlayer.of(task or {})
    if benchmark == "scicode":
        return SciCodePlayer()
    return None
