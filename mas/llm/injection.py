"""Where a model injects the one wrong step of a run: ground truth for attribution and rollback tests.

A plain value shared by the sweep that plans it (:mod:`mas.sweep.injection`), the runtime that records the
step index the injected output got (:mod:`mas.topologies.agent`) and the provider that carries it out (the
scripted double, which receives it as its own per-run argument ``injection``). A provider marks the injected
reply with ``response_metadata[INJECTED_KEY] = True``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INJECTED_KEY = "scripted_injected"
"""The reply's ``response_metadata`` key saying it is the injected wrong step."""


@dataclass(kw_only=True, slots=True)
class InjectionPlan:
    """Where to inject the one wrong step; ``agent``/``step`` None mean any."""

    agent: str | None = None
    step: int | None = None
    fired: bool = False
    """True once injected (or when resuming a run whose injection already fired)."""
    fired_at: dict[str, Any] | None = None
    """``{"agent": ..., "step": ...}`` of the injected step."""
    position: str | None = None
    """Rollback scenario (``left``, ``mid``, ``right``, ``uniform``) that placed ``step`` (:mod:`mas.sweep.injection`)."""
    fraction: float | None = None
    """With ``position``: the drawn relative position in [0, 1) (``step`` = floor(fraction × probe_steps))."""
    probe_steps: int | None = None
    """With ``position``: steps the run takes without the error (counted before it runs)."""
