"""The scripted double on SciCode: a well-formed answer that solves nothing.

The double knows no science and the task carries no ground truth it could replay, so every role answers the
step's function header with a body that raises ``NotImplementedError`` (the answer artifact is code, in a
```python block as upstream asks): a scripted sweep runs SciCode end to end under every system through the
real prompts, extraction and judge, and scores 0 on every sub-step; the reasoning says why.
"""

from __future__ import annotations

from benchmark.scicode.prompts import DEPENDENCIES_MARKER, NEXT_STEP_MARKER, next_step_header
from mas.scripted.arith import answer_json
from mas.scripted.model import ScriptedContext

WHY = "The scripted double writes no scientific code: a stub of the step's function (SciCode scores 0 here)."


def is_scicode(ctx: ScriptedContext) -> bool:
    text = ctx.text()
    return NEXT_STEP_MARKER in text and DEPENDENCIES_MARKER in text


def scicode_turn(ctx: ScriptedContext) -> str:
    """The step's header with a body raising ``NotImplementedError``, in a ```python block."""
    header = next_step_header(ctx.text()) or "def solution(*args):"
    stub = f"{header}\n    raise NotImplementedError('scripted double')"
    return answer_json(WHY, f"```python\n{stub}\n```", 0.2)
