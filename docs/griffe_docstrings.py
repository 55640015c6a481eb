"""A griffe extension for the API reference: the project's docstrings as Markdown, without editing them.

The docstrings are written for ``help()`` and Sphinx-style readers: doctest examples (``>>>``) sit in the text
unfenced, and cross-references are reST roles (``:func:`take_turn```). Rendered as Markdown the first would be
read as prose (a doctest's output ``[('x', True)]`` even as a link), the second would show its role. This
extension fences each doctest block as ``pycon`` and keeps a role's target only, as code.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const|type):`~?([^`]+)`")
"""A reST cross-reference role; its target is kept as inline code."""


def fence_doctests(text: str) -> str:
    """``text`` with each doctest block (``>>>`` lines, their ``...`` continuations and output up to a blank
    line) inside a ```` ```pycon ```` fence; text already inside a fence is left as it is."""
    out: list[str] = []
    in_block = in_fence = False
    for line in text.splitlines():
        stripped = line.lstrip()
        if not in_block and stripped.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and not in_block and stripped.startswith(">>>"):
            out.append("```pycon")
            in_block = True
        elif in_block and not stripped:
            out.append("```")
            in_block = False
        out.append(line)
    if in_block:
        out.append("```")
    return "\n".join(out)


def markdown_docstring(text: str) -> str:
    """The docstring as the API reference shows it: doctests fenced, roles reduced to their targets."""
    return ROLE.sub(lambda m: f"`{m[1]}`", fence_doctests(text))


class MarkdownDocstrings(Extension):
    """Rewrites every loaded object's docstring with :func:`markdown_docstring`."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
