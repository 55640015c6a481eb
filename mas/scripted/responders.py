"""Registers every scripted responder (imported once, when a scripted route is built)."""

from mas.scripted import agents, browsecomp, orchestrator  # noqa: F401  (each registers)
