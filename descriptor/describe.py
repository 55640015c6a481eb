"""What a registered entry is, in one line, and a listing of names with theirs (``list-systems``,
``list-benchmarks``).

An entry says it with a ``description`` (a field of a declaration, a class attribute of an adapter); without one,
the first paragraph of its own docstring speaks for it, so a plugin's adapter or graph builder is described as
the built-in ones are, with nothing to add.

>>> class Arith:
...     '''Synthetic arithmetic,
...     a few operations on an integer.
...
...     Details that stay out of the listing.'''
>>> describe(Arith)
'Synthetic arithmetic, a few operations on an integer.'
>>> print(listing([("arith", "Synthetic arithmetic."), ("gsm8k", "Grade-school math word problems.")], width=40))
arith  Synthetic arithmetic.
gsm8k  Grade-school math word problems.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Sequence


_GENERIC_BASES = ("builtins", "abc", "typing")
"""Modules of bases that say what a Python class is, not what an entry is (``object``, ``abc.ABC``, ``Generic``)."""


def describe(entry: object) -> str:
    """One line for ``entry``: its ``description`` when it has a non-empty one, else the first paragraph of the
    docstring of the function or module, or of the class (or its nearest concrete base with one: an abstract base
    such as :class:`benchmark.base.Benchmark` describes every adapter, so none in particular), whitespace folded;
    empty when it has neither."""
    text = getattr(entry, "description", None)
    if not (isinstance(text, str) and text.strip()):
        text = ""
        if inspect.isclass(entry):
            text = next((c.__dict__["__doc__"] for c in entry.__mro__ if c.__module__ not in _GENERIC_BASES
                         and not inspect.isabstract(c) and c.__dict__.get("__doc__")), "")
        elif inspect.isfunction(entry) or inspect.ismethod(entry) or inspect.ismodule(entry):
            text = entry.__doc__ or ""
    first = inspect.cleandoc(text).split("\n\n", 1)[0] if isinstance(text, str) else ""
    return " ".join(first.split())


def listing(pairs: Sequence[tuple[str, str]], width: int | None = None) -> str:
    """One ``name  description`` line per pair, descriptions aligned; with ``width`` (a terminal's columns) a
    description longer than the line goes on under itself instead of being cut (names are never wrapped)."""
    pad = max((len(name) for name, _ in pairs), default=0) + 2
    lines = []
    for name, text in pairs:
        head = name.ljust(pad)
        if not text:
            lines.append(name)
        elif width is None or width - pad < 20:  # no room for a column of text beside the names: one line
            lines.append(head + text)
        else:
            lines.append(textwrap.fill(text, width=width, initial_indent=head, subsequent_indent=" " * pad,
                                       break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)


def terminal_width() -> int | None:
    """stdout's columns when it is a terminal; None otherwise (a pipe or a file gets one line per entry, for grep)."""
    import shutil
    import sys

    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None
