"""The commands of ``mas-econ``: each stage declares its own, the command line on top (``mas_econ/cli.py``) lists
them and runs the one asked for.

A stage declares its commands in a light module, ``<stage>/commands.py``, which imports nothing but this one: each
command's line in ``--help`` and the function filling its parser, named ``module:function`` and imported only when
that command runs. So ``--help`` lists every command without importing any command's module, and a command
imports its own module only, not the others' (numpy and pydantic models for the conformal and rollback options;
``scripts/bench_import.py --commands`` times it). This module holds the descriptor stage's own.

A module that adds options to another stage's command when imported is declared with :func:`declare_hook`
(``attribution.cli.sweep`` adds ``run --rollback`` as a sweep hook; ``mas``, which owns ``run``, must not import
``attribution``): the command line imports it before it fills that command's parser. (An installed plugin adds
``run``'s options through the sweep hooks' own entry points.)

Plugins add commands the same way: a ``--plugin`` module, or an installed package's entry point in the group
``mas_econ.commands`` naming a module, that decorates the function filling a command's parser with
:func:`command`; or an entry point naming a :class:`Command`, registered under the entry point's name.
"""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from descriptor.registry import Registry, RegistryError

_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class Command:
    """One command: its line in ``--help`` and the function that fills its parser."""

    help: str
    """One line in ``--help``'s list of commands (argparse's ``help``: a literal ``%`` is written ``%%``)."""
    parser: str
    """``module:function``: ``function(parser)`` adds the command's description and arguments and sets
    ``func``, its handler: ``func(args)`` runs the command and returns its exit status."""

    def __post_init__(self) -> None:
        if not _TARGET.fullmatch(self.parser):
            raise RegistryError(f"a command's parser is given as module:function, not {self.parser!r}")

    @property
    def module(self) -> str:
        """The module holding the function that fills the parser (and, as a rule, the command's handler)."""
        return self.parser.partition(":")[0]

    def fill(self, parser: argparse.ArgumentParser) -> None:
        """Import the command's module and fill ``parser`` with its function; :class:`RegistryError` naming the
        command (``parser.prog``) when the module or the function is not there."""
        module, _, path = self.parser.partition(":")
        try:
            target: Any = importlib.import_module(module)
        except ImportError as err:
            raise RegistryError(f"{parser.prog}: {module} could not be imported: {err}") from err
        for name in path.split("."):
            if not hasattr(target, name):
                raise RegistryError(f"{parser.prog}: {self.parser} does not exist ({module} has no {path})")
            target = getattr(target, name)
        target(parser)


def _command(name: str, entry: object) -> Command:
    """What an entry point of ``mas_econ.commands`` names, when not a module: a :class:`Command`."""
    if not isinstance(entry, Command):
        raise TypeError(f"expected a descriptor.commands.Command (or a module declaring commands), "
                        f"got {type(entry).__name__}")
    return entry


COMMANDS: Registry[Command] = Registry("command", "mas_econ.commands", adapt=_command)
"""Command name -> :class:`Command`, in the order declared (the order ``--help`` lists them)."""

_HOOKS: dict[str, list[str]] = {}
"""Command -> the modules adding options to it when imported, in the order declared (:func:`declare_hook`)."""


def declare(name: str, help: str, parser: str) -> Command:
    """Register command ``name``: ``help``, its line in ``--help``; ``parser``, the ``module:function`` that fills
    its parser. Declaring one name with two different functions is a :class:`RegistryError` naming both."""
    return COMMANDS.register(name, Command(help, parser), origin=parser)


F = TypeVar("F", bound=Callable[[argparse.ArgumentParser], None])


def command(name: str, help: str) -> Callable[[F], F]:
    """Decorator declaring the decorated function as the one filling command ``name``'s parser (a plugin's command;
    the stages declare theirs with :func:`declare` in light modules, so listing them imports none)."""

    def register(fill: F) -> F:
        declare(name, help, f"{fill.__module__}:{fill.__qualname__}")
        return fill

    return register


def declare_hook(command_name: str, module: str) -> None:
    """Declare that importing ``module`` adds options to command ``command_name`` (a sweep hook adding ``run``'s);
    declared by the module that declares the commands of the hook's stage or plugin."""
    hooks = _HOOKS.setdefault(command_name, [])
    if module not in hooks:
        hooks.append(module)


def hooks_of(command_name: str) -> list[str]:
    """The modules declared to add options to ``command_name``, in the order declared."""
    return list(_HOOKS.get(command_name, ()))


# The descriptor stage's commands: what is computed from run files.
declare("summarize-experiment", "rebuild descriptors, summaries, economics and plots from run files",
        "descriptor.cli:summarize_experiment_parser")
declare("plan", "tasks needed for 80 %% power to detect a difference in success rate",
        "descriptor.plan_cli:plan_parser")
declare("report", "write the experiment's HTML report (opens offline from disk)",
        "descriptor.report.cli:report_parser")
declare("view", "serve the experiments under an output root on 127.0.0.1, updated as runs finish",
        "descriptor.report.view_cli:view_parser")
