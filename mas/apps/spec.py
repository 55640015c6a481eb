"""Loading an application system: ``--systems app:MODULE:FACTORY``, ``[systems.<name>] graph = "MODULE:FACTORY"``,
or an installed package's ``mas_econ.systems`` entry point naming its factory.

The module is imported (the current directory is searched too, as for ``--plugin``), the factory called (with the
route's chat model when it takes a ``model`` argument) and what it returns checked: a LangGraph ``StateGraph`` or
compiled graph whose input takes the task and whose state holds the answer (see :mod:`mas.apps.topology`).
Anything else is a :class:`~descriptor.errors.UserError` naming the module and what was expected (exit 2), before
any run. Each application system is loaded once per process.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import TYPE_CHECKING, Any

from descriptor.describe import describe
from descriptor.errors import UserError
from mas.apps.topology import MESSAGES, AppTopology, Precompiled, agent_graph_of, agents_fn
from mas.study_settings import AppSettings
from mas.topologies.declaration import Role

if TYPE_CHECKING:
    from mas.config import ExperimentConfig

APP_PREFIX = "app:"
"""What a system name given as ``app:MODULE:FACTORY`` starts with."""
EXPECTED = ("a LangGraph StateGraph or compiled graph, or a function returning one (taking no argument, or a "
            "`model` argument for the route's chat model)")

_loaded: dict[tuple[str, str], AppTopology] = {}


def app_system(name: str, cfg: ExperimentConfig | None = None) -> AppTopology | None:
    """The application system called ``name`` (``app:MODULE:FACTORY``, or declared in ``cfg``), loaded; None when
    ``name`` is neither. :class:`UserError` when it cannot be loaded."""
    if name.startswith(APP_PREFIX):
        spec = name.removeprefix(APP_PREFIX)
        try:
            settings = AppSettings(graph=spec)
        except ValueError:
            raise UserError(f"--systems {name}: expected app:MODULE:FACTORY (a dotted module name, a colon, and a "
                            "function or graph in it)") from None
        where = name
    elif cfg is not None and name in cfg.systems.apps():
        settings = cfg.systems.apps()[name]
        where = f"systems.{name}.graph = {settings.graph!r}"
    else:
        return None
    key = (name, settings.model_dump_json())
    if key not in _loaded:
        module, _, attr = settings.graph.partition(":")
        _loaded[key] = app_topology(name, _import(module, attr, where), settings, where)
    return _loaded[key]


def installed_system(name: str, entry: Any) -> Any:
    """What an installed package's ``mas_econ.systems`` entry point names, as a system: a topology declaration as
    it is, a graph or graph factory as an application system with the conventions' defaults."""
    from mas.topologies.declaration import Topology

    if isinstance(entry, Topology):
        return entry
    spec = f"{getattr(entry, '__module__', '?')}:{getattr(entry, '__qualname__', type(entry).__name__)}"
    return app_topology(name, entry, AppSettings.model_construct(graph=spec), f"entry point {name} ({spec})")


def _import(module: str, attr: str, where: str) -> Any:
    if os.getcwd() not in sys.path:  # like `python -m` and --plugin: an app is often a file where the sweep starts
        sys.path.append(os.getcwd())
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise UserError(f"{where}: module {module!r} could not be imported: {err}") from None
    except Exception as err:  # the module fails as it runs
        raise UserError(f"{where}: module {module!r} raised on import: {type(err).__name__}: {err}") from None
    target: Any = mod
    for part in attr.split("."):
        if not hasattr(target, part):
            raise UserError(f"{where}: module {module!r} has no {attr!r}; expected {EXPECTED}")
        target = getattr(target, part)
    return target


def _graph(target: Any, where: str) -> Any:
    """The graph ``target`` is or returns: a ``StateGraph`` or a ``CompiledStateGraph``."""
    from langgraph.graph import StateGraph
    from langgraph.graph.state import CompiledStateGraph

    graph = target
    if not isinstance(target, StateGraph | CompiledStateGraph):
        if not callable(target):
            raise UserError(f"{where}: is a {type(target).__name__}; expected {EXPECTED}")
        try:
            params = inspect.signature(target).parameters
        except (TypeError, ValueError):
            params = {}
        required = [p.name for p in params.values() if p.default is p.empty
                    and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "model"]
        if required:
            raise UserError(f"{where}: the factory requires {', '.join(required)}; expected {EXPECTED}")
        try:
            if "model" in params:
                from mas.apps.model import RouteChatModel

                graph = target(model=RouteChatModel())
            else:
                graph = target()
        except Exception as err:
            raise UserError(f"{where}: the factory raised {type(err).__name__}: {err}") from None
    if not isinstance(graph, StateGraph | CompiledStateGraph):
        raise UserError(f"{where}: the factory returned a {type(graph).__name__}; expected a LangGraph StateGraph or "
                        "compiled graph (CompiledStateGraph)")
    return graph


def _keys(compiled: Any, schema: str) -> set[str] | None:
    """The keys of the graph's input or output schema (None when the schema names none)."""
    try:
        props = getattr(compiled, f"get_{schema}_jsonschema")().get("properties")
    except Exception:  # a state type pydantic cannot describe: its channels are the keys
        return {k for k in compiled.channels if not k.startswith(("__", "branch:"))}
    return set(props) if isinstance(props, dict) else None


def app_topology(name: str, target: Any, settings: AppSettings, where: str) -> AppTopology:
    """The declaration of the application system ``name`` whose graph is (or is made by) ``target``."""
    from langgraph.graph import StateGraph

    graph = _graph(target, where)
    try:
        compiled = graph.compile() if isinstance(graph, StateGraph) else graph
    except Exception as err:
        raise UserError(f"{where}: the graph does not compile: {type(err).__name__}: {err}") from None
    inputs, outputs = _keys(compiled, "input"), _keys(compiled, "output")
    into = settings.input_key or MESSAGES
    if inputs is not None and into not in inputs:
        raise UserError(f"{where}: the graph's input has no key {into!r} for the task (its keys: "
                        f"{', '.join(sorted(inputs)) or 'none'}); expected a `messages` list, or name the key that "
                        f"takes the task's text ([systems.<name>] input_key)")
    out_key = settings.answer_key or MESSAGES
    if outputs is not None and out_key not in outputs:
        raise UserError(f"{where}: the graph's final state has no key {out_key!r} to read the answer from (its keys: "
                        f"{', '.join(sorted(outputs)) or 'none'}); expected `messages` ending with an AI message, or "
                        f"name the key that holds the answer ([systems.<name>] answer_key)")
    picture = agent_graph_of(compiled)
    source = graph if isinstance(graph, StateGraph) else Precompiled(graph)
    return AppTopology(
        name=name, build=lambda rt: source, roles=tuple(Role(name=p.name, brief="") for p in picture.agents()),
        agents=agents_fn(picture), graph=settings.graph, input_key=settings.input_key,
        answer_key=settings.answer_key, has_messages=outputs is None or MESSAGES in outputs,
        description=describe(target) or f"a LangGraph application ({settings.graph})")
