"""Registers every scripted responder (imported once, when a scripted route is built)."""

from mas.scripted import agents, orchestrator, supervisor  # noqa: F401  (each registers)
