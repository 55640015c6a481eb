"""The double on SciCode: a well-formed answer that solves nothing.

The double knows no science and the task carries no ground truth it could replay, so every role answers the
step's function header with a body that raises ``NotImplementedError`` (the answer artifact is code, in a
```python block as upstream asks): a scripted sweep runs SciCode end to end under every system through the
real prompts, extraction and judge, and scores 0 on every sub-step; the reasoning says why. The double knows
the benchmark by its name (its per-run argument ``benchmark``); the header it copies is the one the step's
prompt shows, found by the benchmark's own reader of its prompt (:func:`benchmark.scicode.prompts.next_step_header`),
as a model would copy it.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.scicode.prompts import next_step_header
from mas.scripted.scripting import ScriptedContext
from mas.scripted.players import PLAYERS, TaskFields
from mas.scripted.replies import PLAN, answer_json, discussion

WHY = "The scripted double writes no scientific code: a stub of the step's function (SciCode scores 0 here)."


def scicode_turn(ctx: ScriptedContext) -> str:
    """The step's header with a body raising ``NotImplementedError``, in a ```python block."""
    header = next_step_header(ctx.text()) or "def solution(*args):"
    stub = f"{header}\n    raise NotImplementedError('scripted double')"
    return answer_json(WHY, f"```python\n{stub}\n```", 0.2)


@dataclass(frozen=True, slots=True)
class SciCodePlayer:
    """The double's play of a SciCode sub-step: a discussion's answer, the planner's plan, else the stub."""

    def turn(self, ctx: ScriptedContext, role: str, allowed: bool) -> str:
        if (reply := discussion(ctx)) is not None:
            return reply
        if role == "planner":
            return PLAN
        return scicode_turn(ctx)


@PLAYERS.register("scicode")
def scicode_player(fields: TaskFields) -> SciCodePlayer:
    return SciCodePlayer()
