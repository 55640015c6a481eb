"""Package faces that import on first use: ``from attribution import echo`` without paying for sklearn at start-up.

Each package's ``__init__`` names its public surface once (name -> module)
and gets a module ``__getattr__`` (PEP 562) that imports the module when a
name is first read. The CLI imports only what a command uses, so
``python main.py --help`` does not load scikit-learn, LangGraph or matplotlib.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` serving ``exports`` (public name -> defining module)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
