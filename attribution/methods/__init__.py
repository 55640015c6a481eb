"""The method registry: ``METHODS`` maps a name to a factory of async methods.

Method modules register themselves on import (``@register_method``); this package imports its own, installed
packages add theirs through the ``mas_econ.methods`` entry-point group, other code as a plugin
(``--plugin MODULE``).
"""

from __future__ import annotations

from attribution.methods.base import (
    METHODS,
    Method,
    MethodContext,
    MethodFactory,
    Prediction,
    register_method,
    require_model,
)
# The built-in methods register themselves when their modules are imported.
from attribution.methods import baselines, chief, echo, learned, random_baseline  # noqa: F401


def get_method(name: str, **options: object) -> Method:
    """Build method ``name``; an unknown name is a :class:`~descriptor.errors.UserError` listing the known ones."""
    from descriptor.errors import UserError

    if name not in METHODS:
        raise UserError(f"unknown method {name!r}; known methods: {', '.join(METHODS.names())}")
    return METHODS.get(name)(**options)


__all__ = [
    "METHODS",
    "Method",
    "MethodContext",
    "MethodFactory",
    "Prediction",
    "get_method",
    "register_method",
    "require_model",
]
