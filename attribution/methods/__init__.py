"""The method registry: ``METHODS`` maps a name to a factory of async methods.

Method modules register themselves on import. Modules written separately
(the LLM methods) are imported here when present; a missing module is
skipped, any other import error is real and raised.
"""

from __future__ import annotations

import importlib

from attribution.methods.base import (
    METHODS,
    Method,
    MethodContext,
    MethodFactory,
    Prediction,
    register_method,
    require_model,
)
from attribution.methods import random_baseline  # noqa: F401  (registers "random")

OPTIONAL_MODULES: tuple[str, ...] = (
    "attribution.methods.baselines",
    "attribution.methods.echo",
    "attribution.methods.chief",
)


def _import_optional() -> None:
    for name in OPTIONAL_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise


_import_optional()


def get_method(name: str, **options: object) -> Method:
    """Build method ``name``; an unknown name is a :class:`~descriptor.errors.UserError` listing the known ones."""
    from descriptor.errors import UserError

    if name not in METHODS:
        raise UserError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}")
    return METHODS[name](**options)


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
