"""How the double reads an attribution case: the log lines a prompt shows, from the call's hints, a step whose
text holds the marker word ``ERROR`` being the decisive error (the tests' convention).

Attribution sends every call's facts as ``metadata["hints"]`` (:meth:`attribution.llm.calls.CaseLedger.ask`):
``attr_log``, the steps the fitted prompt shows as ``[index, agent, text]`` (text cut as shown), and the
call's positions (``attr_step``, ``attr_range``, ``attr_subtasks``, ...). Nothing here reads the prompt.

>>> import random
>>> ctx = ScriptedContext(messages=[], metadata={"hints": {"attr_log": [[0, "a", "ok"], [1, "b", "ERROR x"]]}},
...                       rng=random.Random(0), inject=False, text_tools=False)
>>> first_marked(ctx), agents_in(ctx)
((1, 'b'), ['a', 'b'])
"""

from __future__ import annotations

from typing import Any

from mas.scripted.scripting import ScriptedContext


def hint(ctx: ScriptedContext, key: str, default: Any = None) -> Any:
    """The call's hint ``key`` (an ``attr_*`` fact attribution sent with it), else ``default``."""
    return ctx.hints.get(key, default)


def lines(ctx: ScriptedContext) -> list[tuple[int, str, str]]:
    """(step, agent, text) of every log line the prompt shows, in prompt order."""
    return [(int(i), str(agent), str(text)) for i, agent, text in hint(ctx, "attr_log") or []]


def marked(ctx: ScriptedContext) -> list[tuple[int, str]]:
    """(step, agent) of the lines holding the marker."""
    return [(i, a) for i, a, text in lines(ctx) if "ERROR" in text]


def first_marked(ctx: ScriptedContext) -> tuple[int, str]:
    """The first marked (step, agent); else the first line's; else ``(0, "unknown")``."""
    hits = marked(ctx)
    if hits:
        return hits[0]
    shown = lines(ctx)
    return (shown[0][0], shown[0][1]) if shown else (0, "unknown")


def agents_in(ctx: ScriptedContext) -> list[str]:
    """The agents of the shown lines, in order of appearance."""
    return list(dict.fromkeys(a for _, a, _ in lines(ctx)))
