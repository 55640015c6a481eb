"""Are the packages ``descriptor``, ``benchmark``, ``mas``, ``attribution`` and ``mas_econ`` this project's? Checked
at import.

PyPI has unrelated distributions that install top-level ``mas``, ``attribution`` or
``benchmark`` packages; pip installing one after ``mas-econ`` overwrites our files without a
word, and ``import mas`` then runs someone else's code. Each package's ``__init__`` calls
:func:`check_packages`, which checks all five once per process (``mas_econ``, the command line, is named like
the distribution, so no other should install it, but a guard that skipped it would be the one gap):

- a package beside a ``pyproject.toml`` naming ``mas-econ`` is a source checkout (or an editable
  install of one): ours;
- otherwise the installed ``mas-econ``'s ``RECORD`` lists the package's ``__init__.py`` with the hash the
  file has on disk: ours. If not, every other installed distribution whose ``RECORD`` claims the
  package is named in an ``ImportError`` (that search, over all distributions, runs only then; when no
  other claims it, nothing clashes and the import goes on).

Cost, once per process, measured with the first four packages (``scripts/bench_import.py``, load average 16.5 on
2 cores, so several times the idle figure): 0.5 ms in a checkout (four ``find_spec`` look-ups, one small file
read); 9.8 ms from an installed wheel (its RECORD read directly, four sha256 of small files),
``importlib.metadata`` never imported. What it cannot catch: a
foreign ``mas/__init__.py`` imported on its own (``import mas`` and nothing of ours after it) runs
before any of our code; the ``mas-econ`` command and every module of ours catch it.
"""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

DISTRIBUTION = "mas-econ"
PACKAGES = ("descriptor", "benchmark", "mas", "attribution", "mas_econ")
"""Every top-level package the wheel installs (``[tool.setuptools.packages.find]``; checked by
tests/project/test_packaging.py)."""
_NAME = re.compile(r'^name\s*=\s*"mas-econ"\s*$', re.M)


@cache
def _checkout(root: Path) -> bool:
    """``root`` holds our ``pyproject.toml`` (a source checkout, the packages beside it)."""
    try:
        return bool(_NAME.search((root / "pyproject.toml").read_text(encoding="utf-8")))
    except OSError:
        return False


@cache
def _record(root: Path) -> dict[str, str]:
    """Path -> ``sha256=...`` of every file ``mas-econ`` installed into ``root`` (its RECORD); empty when none.

    Read directly from ``root/mas_econ-*.dist-info``: importing :mod:`importlib.metadata` costs more (~0.1-0.3 s
    of imports, measured) than the whole check, and only the error path needs it.
    """
    out: dict[str, str] = {}
    for info in root.glob("mas_econ-*.dist-info"):
        try:
            text = (info / "RECORD").read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            path, _, rest = line.partition(",")
            out[path] = rest.partition(",")[0]
    return out


def _sha256(path: Path) -> str:
    import base64
    import hashlib

    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def owners(package: str) -> list[str]:
    """``name version`` of every other installed distribution whose RECORD holds files of ``package`` (slow)."""
    from importlib import metadata

    found = {f"{d.metadata['Name']} {d.version}" for d in metadata.distributions()
             if _normal(d.metadata["Name"] or "") != DISTRIBUTION
             and any(f.parts[:1] == (package,) for f in d.files or [])}
    return sorted(found)


def check_package(package: str, init_file: Path) -> None:
    """Raise ImportError when another distribution owns the package whose ``__init__.py`` is ``init_file``.

    Ours: in a source checkout, or the file ``mas-econ`` installed (same hash). Otherwise a clash only when
    some other distribution claims the package (a file edited by hand after install is left alone).
    """
    root = init_file.parent.parent
    if _checkout(root):
        return
    want = _record(root).get(f"{package}/__init__.py")
    if want and init_file.is_file() and _sha256(init_file) == want:
        return
    others = owners(package)
    if not others:
        return
    first = others[0].split()[0]
    raise ImportError(
        f"the package {package!r} at {init_file.parent} is not {DISTRIBUTION}'s: the distribution "
        f"{' and '.join(others)} installs a top-level {package!r} package too and has overwritten ours. "
        f"Use separate environments, or `pip uninstall {first}` and then "
        f"`pip install --force-reinstall {DISTRIBUTION}`.")


@cache
def check_packages() -> None:
    """Check each of our top-level packages that can be found (once per process)."""
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            check_package(package, Path(spec.origin).resolve())
