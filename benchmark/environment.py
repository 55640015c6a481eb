"""A benchmark's per-run world: tools that act on it, a log of the actions taken, and forks.

Most benchmarks judge an answer string and have no environment
(:meth:`benchmark.base.Benchmark.make_environment` returns ``None``).  A
benchmark whose tasks are solved by acting (WorkBench: sending emails,
deleting events) returns an :class:`Environment` per run:

* :meth:`Environment.tools` are LangChain tools to bind to a model; each call
  goes through :meth:`Environment.call`, so it acts on this environment and is
  logged.  Through LangChain a failed call comes back as a ``ToolMessage`` with
  ``status="error"`` (the tools raise ``ToolException`` with
  ``handle_tool_error=True``), never as an exception out of the run.
* :meth:`Environment.call` runs one call by name and returns a
  :class:`ToolResult` (``ok``, ``output``): the runtime's direct route, which
  also gives it the ok flag to trace.
* :meth:`Environment.fork` is an independent copy (state and log so far) for an
  agent working in parallel; the run's outcome is whichever environment the
  runtime hands to ``Benchmark.evaluate`` (the chosen candidate's).
* :attr:`Environment.actions` is the action log, oldest first;
  :meth:`Environment.changes_state` says which tools can change the state
  (the rest only read it).

>>> from benchmark.registry import get_benchmark
>>> bench = get_benchmark("workbench")
>>> task = bench.load_tasks(1)[0]
>>> env = bench.make_environment(task)
>>> env.call("company_directory.find_email_address", {"name": "nadia"}).output
'["nadia.moreau@atlas.com"]'
>>> [(a.name, a.ok) for a in env.actions]
[('company_directory.find_email_address', True)]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


@dataclass(kw_only=True, frozen=True, slots=True)
class Action:
    """One tool call to make: the benchmark's own tool name and its arguments."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True, slots=True)
class ToolResult:
    """What a call returned: ``ok`` False for a rejected or failed call (``output`` then says why)."""

    ok: bool
    output: str


@dataclass(kw_only=True, frozen=True, slots=True)
class ActionRecord:
    """One entry of the action log: every call, accepted or not, in order."""

    name: str
    """The benchmark's own tool name (e.g. ``calendar.delete_event``), or the unknown name as called."""
    args: dict[str, Any]
    """The arguments as the caller sent them."""
    ok: bool
    output: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": dict(self.args), "ok": self.ok, "output": self.output}


class Environment(ABC):
    """The mutable world of one run (see the module docstring for the contract)."""

    @abstractmethod
    def tools(self) -> list[BaseTool]:
        """LangChain tools bound to this environment (names valid for OpenAI function calling)."""

    @abstractmethod
    def call(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        """Run one tool call (by its function name or the benchmark's own name) and log it; never raises."""

    @abstractmethod
    def fork(self) -> Environment:
        """An independent copy: same state and action log so far; later calls on either leave the other alone."""

    @property
    @abstractmethod
    def actions(self) -> list[ActionRecord]:
        """The action log, oldest first (a copy)."""

    def changes_state(self, name: str) -> bool:
        """Whether a call of tool ``name`` can change the environment (default: every tool may)."""
        return True
