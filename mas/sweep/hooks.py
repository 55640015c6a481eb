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
from mas.logging import get_logger

if TYPE_CHECKING:
    from descriptor.records import RunMetadata, RunResult
    from mas.config import ExperimentConfig
    from mas.tracing import TraceProcessor

log = get_logger(__name__)

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
    """The processors every registered factory gives run ``meta``, in the order of their names.

    A factory that raises, or gives anything but processors (objects with ``on_event`` and ``close``), is
    logged and skipped like a processor that fails: a plugin's exporter never breaks the run it would observe."""
    out: list[TraceProcessor] = []
    for name, factory in TRACE_PROCESSORS.items():
        try:
            made = list(factory(cfg, meta))
            bad = [p for p in made if not all(callable(getattr(p, m, None)) for m in ("on_event", "close"))]
            if bad:
                raise TypeError(f"{type(bad[0]).__name__} is no trace processor (it needs on_event and close)")
        except Exception as err:  # a plugin's factory, not the run, failed
            log.warning("trace processor factory failed; its processors are skipped", factory=name,
                        error=f"{type(err).__name__}: {err}")
            continue
        out += made
    return out
