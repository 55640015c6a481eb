"""One registry type for everything users extend: benchmarks, systems, providers, methods, scorers.

A registry maps a name to an entry (a class, a factory, a declaration). Entries come from three places:

- the project's own modules, with the decorator: ``@BENCHMARKS.register("arith")``;
- installed packages, through the entry-point group named by the registry (``mas_econ.benchmarks``, ...),
  loaded the first time the registry is read. An entry point names either an object, registered under the
  entry point's name, or a module, whose import registers its entries with the decorator;
- modules that are not installed, imported by :func:`load_plugins` (``--plugin MODULE``, config ``plugins``).

Registering a second, different entry under a taken name is an error naming both origins. A plugin that raises
anything while it loads (``SystemExit`` included; a ``KeyboardInterrupt`` still interrupts) is an error naming
it; an entry point that does not load breaks its own registry only, for as long as the process runs (every read
raises the same error), so a command that reads other registries is not broken by it, and a sweep loads every
group before its first run (:func:`check_entry_points`) instead of failing run after run.

>>> COLOURS: Registry[str] = Registry("colour", "mas_econ.colours")
>>> _ = COLOURS.register("red", "#f00")
>>> COLOURS.get("red"), COLOURS.names()
('#f00', ['red'])
>>> COLOURS.get("blue")
Traceback (most recent call last):
...
descriptor.errors.UserError: unknown colour 'blue'; known: red
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import types
import weakref
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from typing import Any, Generic, TypeVar, overload

from descriptor.errors import UserError
from descriptor.suggest import unknown_name

T = TypeVar("T")


class RegistryError(UserError):
    """A name registered twice with different entries, or a plugin that does not load."""


def _origin(entry: object) -> str:
    """Where an entry was defined, as ``module:qualname`` (or its type's, for plain values)."""
    target = entry if hasattr(entry, "__qualname__") else type(entry)
    module = getattr(entry, "__module__", None) or getattr(target, "__module__", "?")
    return f"{module}:{getattr(target, '__qualname__', repr(entry))}"


GROUP_PREFIX = "mas_econ."
"""Every entry-point group of this project starts so (``mas_econ.benchmarks``, ``mas_econ.sweep_hooks``, ...)."""

_REGISTRIES: weakref.WeakSet[Registry[Any]] = weakref.WeakSet()
"""Every registry alive in this process (the project's are module globals, made once each)."""


def _not_loaded(what: str, err: BaseException) -> RegistryError:
    """The error of a plugin that raised ``err`` while loading (re-raised: a ``KeyboardInterrupt``)."""
    if isinstance(err, KeyboardInterrupt):
        raise err
    if isinstance(err, RegistryError):  # a duplicate name it registers says so itself, naming both origins
        return err
    if isinstance(err, ImportError):
        return RegistryError(f"{what} could not be imported: {err}")
    return RegistryError(f"{what} did not load: {type(err).__name__}: {err}")


class Registry(Generic[T]):
    """Name -> entry for one kind of extension, filled by decorator, entry points and plugins."""

    def __init__(self, kind: str, group: str, adapt: Callable[[str, Any], T] | None = None) -> None:
        self.kind = kind
        """What an entry is, for messages: ``benchmark``, ``system``, ``provider``, ..."""
        self.group = group
        """The entry-point group installed packages register under, e.g. ``mas_econ.benchmarks``."""
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._entry_points_loaded = False
        self.adapt = adapt
        """Turns what an entry point names into an entry, ``adapt(name, loaded)`` (the systems' registry takes a
        plain LangGraph graph factory there); None: the object is the entry."""
        self._load_error: str | None = None
        """Why an entry point did not load, raised again by every read (the registry is incomplete)."""
        _REGISTRIES.add(self)

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, entry: T, *, origin: str | None = None) -> T: ...

    def register(self, name: str, entry: Any = None, *, origin: str | None = None) -> Any:
        """Add ``entry`` under ``name``; without ``entry``, a decorator that adds what it decorates.

        Registering the same entry again (same origin, or the very same object: a decorated class that an entry
        point also names) is a no-op, so re-imports are harmless.
        """
        if entry is None:
            return lambda obj: self.register(name, obj, origin=origin)
        if not isinstance(name, str) or not name.strip():
            raise RegistryError(f"a {self.kind} needs a non-empty name; {_origin(entry)} gave {name!r}")
        where = origin or _origin(entry)
        if name in self._entries and self._entries[name] is entry:
            return entry  # the origin first recorded stays: the decorator's, or the entry point's
        if name in self._entries and self._origins[name] != where:
            raise RegistryError(f"{self.kind} {name!r} is registered twice: by {self._origins[name]} and by {where}")
        self._entries[name] = entry
        self._origins[name] = where
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests registering a temporary entry clean up with this)."""
        self._entries.pop(name, None)
        self._origins.pop(name, None)

    def get(self, name: str) -> T:
        """The entry registered as ``name``; :class:`UserError` listing the known names otherwise."""
        self._load_entry_points()
        try:
            return self._entries[name]
        except KeyError:
            raise UserError(unknown_name(self.kind, name, self.names())) from None

    def peek(self, name: str) -> T | None:
        """The entry the code imported so far registered as ``name``, without reading installed packages' entry
        points (None when there is none): for a caller that knows the name is most likely its own and must not pay
        for reading every distribution's entry points (10-60 ms) at start-up, as the command line looking up one
        of the stages' commands."""
        return self._entries.get(name)

    def origin(self, name: str) -> str:
        """Where ``name``'s entry came from (``module:qualname``, or ``distribution:entry point``)."""
        self.get(name)
        return self._origins[name]

    def names(self, *, in_order: bool = False) -> list[str]:
        """Registered names, sorted (``in_order``: in the order they were registered, for listings whose order
        the registering modules choose, as ``--help``'s list of commands)."""
        self._load_entry_points()
        return list(self._entries) if in_order else sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) pairs, sorted by name."""
        return [(n, self._entries[n]) for n in self.names()]

    def __contains__(self, name: object) -> bool:
        self._load_entry_points()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def _load_entry_points(self) -> None:
        """Import the installed packages' entries of this group, once per process."""
        if self._entry_points_loaded:
            if self._load_error is not None:
                raise RegistryError(self._load_error)
            return
        self._entry_points_loaded = True  # first, so an entry point that reads the registry does not recurse
        for ep in _installed_entry_points(tuple(sys.path)).select(group=self.group):
            try:
                loaded = ep.load()
                if not isinstance(loaded, types.ModuleType):  # a module registers its entries itself
                    if self.adapt is not None:
                        try:
                            loaded = self.adapt(ep.name, loaded)
                        except Exception as err:
                            raise RegistryError(f"{self.kind} plugin {_where(ep)} is not usable: {err}") from err
                    self.register(ep.name, loaded, origin=_where(ep))
            except BaseException as err:  # a broken plugin must say which one it is, not fail anonymously
                if isinstance(err, KeyboardInterrupt):
                    self._entry_points_loaded = False
                failed = _not_loaded(f"{self.kind} plugin {_where(ep)}", err)
                self._load_error = str(failed)
                raise failed from err


def _where(ep: metadata.EntryPoint) -> str:
    dist = ep.dist.name if ep.dist is not None else "?"
    return f"{dist}:{ep.value} (entry point {ep.group}/{ep.name})"


def check_entry_points() -> None:
    """Load every installed entry point of this project's groups now (:class:`RegistryError` naming the first
    that does not load): a sweep calls this before its first run, so a broken plugin of any group stops it at
    once instead of failing each run that reaches it. Groups no registry of this process reads yet are imported
    (what their modules register goes to their registries as they are made)."""
    installed = _installed_entry_points(tuple(sys.path))
    for group in sorted(g for g in installed.groups if g.startswith(GROUP_PREFIX)):
        registries = [r for r in list(_REGISTRIES) if r.group == group]
        for registry in registries:
            registry._load_entry_points()
        for ep in installed.select(group=group) if not registries else ():
            try:
                ep.load()
            except BaseException as err:
                raise _not_loaded(f"plugin {_where(ep)}", err) from err


@functools.lru_cache(maxsize=4)
def _installed_entry_points(path: tuple[str, ...]) -> metadata.EntryPoints:
    """Every installed distribution's entry points, read once per ``sys.path``: reading them walks every
    distribution's metadata (40-160 ms here), and a command reads several registries."""
    return metadata.entry_points()


_PLUGINS: list[str] = []


def load_plugins(modules: Iterable[str]) -> list[str]:
    """Import each plugin module (``--plugin``, config ``plugins``); they register with the decorators.

    Returns every plugin module imported so far in this process, in order, so a sweep can hand the same list to
    its worker processes. A module that does not import is a :class:`UserError` naming it. Like ``python -m``,
    the current directory is searched too (after ``sys.path``): a plugin is often a file where the sweep starts.
    """
    for name in modules:
        if name in _PLUGINS:
            continue
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())
        try:
            importlib.import_module(name)
        except BaseException as err:  # a plugin that fails as it runs (a SyntaxError, a raise, sys.exit): say which
            raise _not_loaded(f"plugin {name!r}", err) from err
        _PLUGINS.append(name)
    return list(_PLUGINS)


def loaded_plugins() -> list[str]:
    """The plugin modules :func:`load_plugins` imported in this process, in order."""
    return list(_PLUGINS)
