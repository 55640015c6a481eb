"""Each system's graph compiled once per process and reused by every run of the same shape.

A topology's builder closes over the run's :class:`~mas.topologies.agent.RunContext`; compiling its
``StateGraph`` took 12-20 ms a run (node signatures, type hints, channel set-up), a fifth of a scripted
run. Here the builder gets a :class:`CurrentRun` instead: a stand-in whose every attribute read at run
time is the running run's context (a ``ContextVar``, set around each run like the tracer). What the
builder reads while building (the config, the personas, the system's options) shapes the graph, so the
compiled graph is kept under the values of exactly the attributes its builder read: a builder that read
``rt.cfg`` and ``rt.personas`` is rebuilt for another config or other personas, and one that read
``rt.question`` is rebuilt for every task. Builders must be deterministic in what they read (the built-in
ones are); a value that is neither JSON nor hashable is never reused.

Each run gets the compiled graph with its own checkpointer (``Pregel.copy``, ~0.1 ms).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import types
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from mas.topologies.agent import RunContext
    from mas.topologies.declaration import Topology

_current: contextvars.ContextVar[RunContext] = contextvars.ContextVar("mas_run_context")

MAX_GRAPHS = 64
"""Compiled graphs kept per process (the least recently used goes first)."""


class CurrentRun:
    """A :class:`~mas.topologies.agent.RunContext` stand-in: every attribute is the current run's.

    While a builder runs, the names it reads are recorded (its methods are bound to this stand-in then, so
    what ``rt.specialise`` reads is recorded too); afterwards reads just go through.
    """

    __slots__ = ("_reads",)

    def __init__(self) -> None:
        object.__setattr__(self, "_reads", None)

    def __getattr__(self, name: str) -> Any:
        rt = _current.get()
        reads: set[str] | None = object.__getattribute__(self, "_reads")
        if reads is not None:
            if inspect.isfunction(getattr(type(rt), name, None)):
                return types.MethodType(getattr(type(rt), name), self)
            value = getattr(rt, name)  # what is not there (LangGraph probing ``__self__``) shapes nothing
            reads.add(name)
            return value
        return getattr(rt, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(_current.get(), name, value)


@contextlib.contextmanager
def current_run(rt: RunContext) -> Iterator[None]:
    """Make ``rt`` the context every :class:`CurrentRun` reads in the enclosed code (and the tasks it starts)."""
    token = _current.set(rt)
    try:
        yield
    finally:
        _current.reset(token)


_graphs: OrderedDict[tuple[Any, ...], CompiledStateGraph] = OrderedDict()
_reads: dict[Topology, frozenset[str]] = {}
"""Per topology: every attribute its builder has read while building (the union over builds)."""
_fingerprints: OrderedDict[int, tuple[Any, str]] = OrderedDict()


def _fingerprint(value: Any) -> Any:
    """A hashable stand-in for ``value`` equal for equal values; raises TypeError when there is none."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):  # the config: once per object (a sweep passes the same one to every run)
        hit = _fingerprints.get(id(value))
        if hit is None or hit[0] is not value:
            hit = (value, value.model_dump_json())  # the object is held, so its id is not reused meanwhile
            _fingerprints[id(value)] = hit
            if len(_fingerprints) > MAX_GRAPHS:
                _fingerprints.popitem(last=False)
        return ("model", type(value), hit[1])
    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        return ("json", json.dumps(value, sort_keys=True))
    except (TypeError, ValueError):
        hash(value)  # identity-hashed objects (a per-run factory) are kept by the key itself: no reuse
        return ("object", value)


def compiled_graph(topology: Topology, rt: RunContext) -> CompiledStateGraph:
    """``topology``'s graph for a run of ``rt``, compiled without a checkpointer (call it under
    :func:`current_run`, and give it one with ``graph.copy({"checkpointer": saver})``)."""
    names = _reads.get(topology)
    key: tuple[Any, ...] | None = None
    if names is not None:
        try:
            key = (topology, *((n, _fingerprint(getattr(rt, n))) for n in sorted(names)))
        except TypeError:
            key = None
        if key is not None and (graph := _graphs.get(key)) is not None:
            _graphs.move_to_end(key)
            return graph
    stand_in = CurrentRun()
    read: set[str] = set()
    object.__setattr__(stand_in, "_reads", read)
    try:
        graph = topology.build(stand_in).compile()  # type: ignore[arg-type]
    finally:
        object.__setattr__(stand_in, "_reads", None)
    _reads[topology] = frozenset(read) | (names or frozenset())
    try:
        key = (topology, *((n, _fingerprint(getattr(rt, n))) for n in sorted(_reads[topology])))
    except TypeError:
        return graph
    _graphs[key] = graph
    if len(_graphs) > MAX_GRAPHS:
        _graphs.popitem(last=False)
    return graph
