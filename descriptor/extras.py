"""Optional extras: a feature whose packages are not in the core install says, in one line, what to install.

The core install carries what every run needs; the packages of one feature come with its extra of
``pyproject.toml`` (``pip install 'mas-econ[dask]'``, or ``pip install -e '.[dask]'`` in a checkout).

>>> sorted(EXTRAS)
['dask', 'hf', 'inspect', 'parquet']
>>> missing_extra("dask", "--executor dask")
"--executor dask needs the optional extra 'dask' (dask, distributed): pip install 'mas-econ[dask]' (in a checkout: pip install -e '.[dask]')"
"""

from __future__ import annotations

import importlib
from types import ModuleType

from descriptor.errors import UserError

EXTRAS: dict[str, tuple[str, ...]] = {
    "dask": ("dask", "distributed"),
    "parquet": ("pyarrow",),
    "inspect": ("inspect_ai",),
    "hf": ("datasets",),
}
"""Extra -> the modules it installs (the first is the one features import); the same names as in
``[project.optional-dependencies]``."""


def missing_extra(extra: str, feature: str) -> str:
    """The one line saying that ``feature`` needs ``extra`` and the ``pip install`` that adds it."""
    return (f"{feature} needs the optional extra {extra!r} ({', '.join(EXTRAS[extra])}): "
            f"pip install 'mas-econ[{extra}]' (in a checkout: pip install -e '.[{extra}]')")


def require_extra(extra: str, feature: str, module: str | None = None) -> ModuleType:
    """Import ``module`` (default: the extra's first) for ``feature``; :class:`UserError` of :func:`missing_extra`
    when it is not installed."""
    name = module or EXTRAS[extra][0]
    try:
        return importlib.import_module(name)
    except ImportError as err:
        if err.name is not None and err.name.split(".")[0] != name.split(".")[0] \
                and err.name.split(".")[0] not in EXTRAS[extra]:
            raise  # the package is there but one of its own imports fails: that error says more than ours
        raise UserError(missing_extra(extra, feature)) from None
