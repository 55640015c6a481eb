"""How the scripted double reads a case: the rendered log lines ``[i] agent: text`` of an attribution prompt,
a step whose text holds the marker word ``ERROR`` being the decisive error (the tests' convention).

Shared by the scripted answers each attribution method registers beside its own prompts
(:mod:`mas.llm.scripting`); call-specific positions (the step under review, ranges) arrive as invoke
metadata (``attr_*`` keys). The line format is :func:`attribution.llm.prompting.render_steps`'s.
"""

from __future__ import annotations

import re

from mas.llm.scripting import ScriptedContext

_LINE_RE = re.compile(r"^\[(\d+)\] ([^:\n]+): (.*)$", re.M)


def lines(ctx: ScriptedContext) -> list[tuple[int, str, str]]:
    """(step, agent, text) of every rendered log line in the prompt."""
    return [(int(m.group(1)), m.group(2).strip(), m.group(3)) for m in _LINE_RE.finditer(ctx.text())]


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
