"""The systems a run can use, by name: the SAS and the multi-agent topologies.

:data:`SYSTEMS` is one registry (:class:`descriptor.registry.Registry`) for the built-in topologies, installed
packages' (entry-point group ``mas_econ.systems``) and plugins' (``--plugin MODULE``, config ``plugins``).
Each entry is a topology's declaration (:class:`mas.topologies.declaration.Topology`):
its ``build`` makes an uncompiled LangGraph ``StateGraph`` for one run; every
graph leaves its final answer in ``state["answer"]`` and its per-stage metrics
(rounds used, stop reasons) in ``state["stages"]``. Adding a topology is one
module under :mod:`mas.topologies` (its builder and its ``TOPOLOGY``
declaration, registered with :func:`~mas.topologies.declaration.register_system`) plus its import here; its
roles, routes, pictures and LangGraph Studio graph follow (``python main.py studio-config`` rewrites
``langgraph.json``). A topology outside the project is the same module in its own package, registered
through an entry point (see ``examples/plugin/``). A LangGraph graph the user already has is an application
system (:mod:`mas.apps`): named ``app:MODULE:FACTORY`` or declared in the config (``[systems.<name>] graph``),
loaded by :func:`get_system`, or registered by an entry point naming its factory.

Routing functions (conditional edges) are ``async def`` like the nodes:
LangGraph runs a plain ``def`` one in a thread pool on every step, and
those hand-offs cost a sweep of 16 concurrent runs about 3 % efficiency.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from descriptor.errors import UserError
from descriptor.layout import split_unit
from descriptor.suggest import unknown_name
from mas.config import ExperimentConfig
# The built-in topologies register themselves in SYSTEMS when their modules are imported.
from mas.topologies import debate, orchestrator, representative_exchange, sas, sas_matched, supervisor  # noqa: F401
from mas.apps.spec import APP_PREFIX, app_system, installed_system
from mas.topologies.declaration import SYSTEMS, Topology, register_system
from mas.topologies.personas import ROLE as PERSONA_ROLE

__all__ = ["SYSTEMS", "agent_roles", "final_answer", "get_system", "known_system", "register_system", "stage_metrics"]

SYSTEMS.adapt = installed_system  # an entry point may name a LangGraph graph factory: an application system


def get_system(name: str, cfg: ExperimentConfig | None = None) -> Topology:
    """The declaration of system ``name`` (or of a model-matrix unit's system, ``debate@gpt``): a registered one, or
    an application system (:mod:`mas.apps`: ``app:MODULE:FACTORY``, or declared in ``cfg``'s ``[systems.<name>]``);
    ``UserError`` naming the known ones otherwise, or saying why the application cannot be loaded."""
    name = split_unit(name)[0]
    if name in SYSTEMS:
        return SYSTEMS.get(name)
    app = app_system(name, cfg)
    if app is None:
        declared = sorted(cfg.systems.apps()) if cfg is not None else []
        raise UserError(unknown_name("system", name, [*SYSTEMS.names(), *declared],
                                     hint=" (or app:MODULE:FACTORY for a LangGraph graph of your own)"))
    return app


def known_system(name: str, cfg: ExperimentConfig | None = None) -> bool:
    """Whether ``name`` names a system (without loading an application system)."""
    name = split_unit(name)[0]
    return (name in SYSTEMS or name.startswith(APP_PREFIX)
            or (cfg is not None and name in cfg.systems.apps()))


def unit_config(cfg: ExperimentConfig, unit: str) -> ExperimentConfig:
    """The config a run of ``unit`` uses: for ``system@model``, ``model``'s route as the default (roles that name
    another route keep it); for a plain system name, ``cfg`` itself."""
    _, model = split_unit(unit)
    if model is None:
        return cfg
    return cfg.model_copy(update={"models": {**cfg.models, "default": cfg.route(model)}})


def agent_roles(systems: Iterable[str] | None = None, cfg: ExperimentConfig | None = None) -> tuple[str, ...]:
    """Every role the given systems (default: all) may ask a model for, ``judge`` included where used, and the
    persona generator when ``cfg`` generates personas.

    >>> agent_roles(["sas"])
    ('solver',)
    """
    names = SYSTEMS.names() if systems is None else systems
    roles = [r for n in names for r in get_system(n, cfg).role_names()]
    if cfg is not None and cfg.mas.persona_mode == "generated":
        roles.append(PERSONA_ROLE)
    return tuple(dict.fromkeys(roles))


def final_answer(state: dict[str, Any]) -> str | None:
    """The answer artifact a finished graph left, or None (also for an empty one: no answer was produced, so the
    run is not completed, whichever topology picked it)."""
    ans = state.get("answer")
    if not ans:
        return None
    art = ans.get("answer_artifact")
    return None if art is None or not str(art).strip() else str(art)


def stage_metrics(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-stage metrics of looped stages (empty for the SAS)."""
    return list(state.get("stages") or [])
