"""What a sweep does on behalf of other modules, stages above ``mas`` and plugins: registered hooks.

- :data:`SWEEP_HOOKS`: options of ``run`` and work after the sweep (``run --rollback``).
- :data:`TRACE_PROCESSORS`: processors every traced run's events go to besides its trace file (the
  OpenTelemetry exporter, :mod:`mas.otel`).

Both are registries (:class:`descriptor.registry.Registry`); this module stays light (no LangChain), so
registering costs the command line nothing.

``mas`` must not import ``attribution``, yet ``run --rollback`` rolls back the sweep's failed runs before the
summary. So ``attribution.cli.sweep`` registers a :class:`SweepHook` here when it is imported, and the ``run``
command (:mod:`mas.cli`) asks every registered hook for its options, lets each check them before any run starts,
and calls what they return after the sweep. Installed packages add hooks through the ``mas_econ.sweep_hooks``
entry-point group, other code as a plugin (``--plugin MODULE``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from descriptor.registry import Registry

if TYPE_CHECKING:
    from descriptor.records import RunMetadata, RunResult
    from mas.config import ExperimentConfig
    from mas.tracing import TraceProcessor

AfterSweep = Callable[["list[RunResult]"], int]
"""Runs after the sweep, before its summary, with the sweep's results; returns an exit status (0: fine)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class SweepHook:
    """Options ``run`` accepts on a hook's behalf, and the work it does after the sweep when they ask for it."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the hook's options to ``run``'s parser (in an argument group of its own)."""
    prepare: Callable[[argparse.Namespace, Any], AfterSweep | None]
    """Checks the options before any run starts (bad input raises ``UserError`` then, not after an hour of
    runs); returns what to do after the sweep, or None when the options ask for nothing."""


SWEEP_HOOKS: Registry[SweepHook] = Registry("sweep hook", "mas_econ.sweep_hooks")
"""Hook name -> :class:`SweepHook`, filled when the modules defining them are imported (``main.py`` imports
every command module before it builds a parser)."""


ProcessorFactory = Callable[["ExperimentConfig", "RunMetadata"], "list[TraceProcessor]"]
"""``(run's config, run's metadata) -> processors`` for one traced run ([] when it has nothing to do)."""

TRACE_PROCESSORS: Registry[ProcessorFactory] = Registry("trace processor", "mas_econ.trace_processors")
"""Name -> factory of the processors a traced sweep run gets besides its own trace file (exporters, progress
printers); a processor that fails is logged and skipped by the tracer, never breaking the run."""


def registered_processors(cfg: ExperimentConfig, meta: RunMetadata) -> list[TraceProcessor]:
    """The processors every registered factory gives run ``meta``, in the order of their names."""
    return [p for _, factory in TRACE_PROCESSORS.items() for p in factory(cfg, meta)]
