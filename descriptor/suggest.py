""""Did you mean": the known names closest to one that is not known, for every error that names an unknown
system, benchmark, option or config key.

One rule everywhere: :func:`difflib.get_close_matches` (ratio cutoff 0.6, at most three) on the names folded to
lower case, so ``GSM8K`` finds ``gsm8k``; no close name, no hint.

>>> unknown_name("system", "debte", ["debate", "sas", "supervisor"])
"unknown system 'debte' (did you mean 'debate'?); known: debate, sas, supervisor"
>>> did_you_mean("zzz", ["debate", "sas"])
''
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any

CUTOFF = 0.6
""":func:`difflib.get_close_matches`' similarity ratio a name must reach (its default)."""


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The known names closest to ``name``, best first (case folded; at most ``n``).

    >>> close_names("GSM8K", ["gsm8k", "arith"])
    ['gsm8k']
    """
    by_folded: dict[str, str] = {}
    for k in known:
        by_folded.setdefault(str(k).casefold(), str(k))
    matches = difflib.get_close_matches(str(name).casefold(), list(by_folded), n=n, cutoff=CUTOFF)
    return [by_folded[m] for m in matches]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or `` (did you mean 'x' or 'y'?)`` for ``name``; empty when nothing is close.

    >>> did_you_mean("debat", ["debate", "debater", "sas"])
    " (did you mean 'debate' or 'debater'?)"
    """
    matches = close_names(name, known)
    if not matches:
        return ""
    quoted = [repr(m) for m in matches]
    said = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {said}?)"


def unknown_name(kind: str, name: str, known: Sequence[str], *, hint: str = "") -> str:
    """The message for an unknown ``kind`` called ``name``: the suggestion, then every known name (``hint`` after
    them, e.g. another way to name one)."""
    listed = ", ".join(known) or "(none)"
    return f"unknown {kind} {name!r}{did_you_mean(name, known)}; known: {listed}{hint}"


def unknown_names(names: Sequence[str], known: Sequence[str]) -> str:
    """Several unknown names, each with its own suggestion: ``debte (did you mean 'debate'?), zzz``."""
    return ", ".join(f"{n}{did_you_mean(n, known)}" for n in names)


def keys_at(model: type, loc: Sequence[str | int]) -> list[str]:
    """The keys the pydantic ``model`` accepts at ``loc`` (a validation error's location without its last part,
    the key refused as extra): the fields of the model found by walking ``loc`` through fields, ``dict`` values
    and list items; empty when the walk leads to no model. For the experiment config, ``keys_at(ExperimentConfig,
    ["models", "default"])`` is a route's keys (``provider``, ``model``, ``base_url``, ...).
    """
    node: Any = model
    for part in loc:
        node = _step(_unwrap(node), part)
        if node is None:
            return []
    node = _unwrap(node)
    fields = getattr(node, "model_fields", None)
    if not isinstance(node, type) or not isinstance(fields, dict):
        return []
    return [f.alias or name for name, f in fields.items()]


def _unwrap(tp: Any) -> Any:
    """``X | None`` -> ``X`` (the first argument of a union that is a model or a container)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is not type(None) and (hasattr(arg, "model_fields") or typing.get_origin(arg) is not None):
                return arg
    return tp


def _step(tp: Any, part: str | int) -> Any:
    """What ``tp`` holds at ``part``: a model's field type, a dict's value type, a list's item type."""
    fields = getattr(tp, "model_fields", None)
    if isinstance(tp, type) and isinstance(fields, dict):
        for name, f in fields.items():
            if part in (name, f.alias):
                return f.annotation
        # a model taking extra keys of a declared type (``__pydantic_extra__: dict[str, X]``)
        try:
            extra = typing.get_type_hints(tp).get("__pydantic_extra__")
        except (NameError, TypeError):  # an annotation that does not resolve here: no suggestion, no failure
            return None
        return _step(extra, part) if extra is not None else None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin in (list, tuple, set, frozenset) and args and isinstance(part, int):
        return args[0]
    return None
