"""One run's WorkBench sandbox: its state, the tools the task allows, and the action log.

>>> env = WorkbenchEnvironment(task_id="t", tool_names=("calendar.delete_event",))
>>> env.call("calendar__delete_event", {"event_id": "00000256"})
ToolResult(ok=True, output='Event deleted successfully.')
>>> env.call("calendar.delete_event", {"event_id": "00000256"})
ToolResult(ok=False, output='Event not found.')
>>> env.fork().call("calendar.delete_event", {"id": 1}).ok
False
>>> len(env.actions)
2
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchmark.environment import ActionRecord, Environment, ToolResult
from benchmark.workbench.state import WorkbenchState
from benchmark.workbench.toolkit import TOOLS, langchain_tool, resolve
from benchmark.workbench.toolspec import ToolError, parse_args

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


def _text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


class WorkbenchEnvironment(Environment):
    """The sandbox databases of one run; ``tool_names`` (WorkBench names) are the tools this task offers."""

    def __init__(self, *, task_id: str, tool_names: Sequence[str], state: WorkbenchState | None = None,
                 log: Sequence[ActionRecord] = ()) -> None:
        unknown = [n for n in tool_names if n not in TOOLS]
        if unknown:
            raise ValueError(f"unknown WorkBench tool(s): {', '.join(unknown)}")
        self.task_id = task_id
        self.tool_names = tuple(tool_names)
        self.state = state if state is not None else WorkbenchState.initial()
        self._log = list(log)
        self._tools: list[BaseTool] | None = None

    def tools(self) -> list[BaseTool]:
        if self._tools is None:
            self._tools = [langchain_tool(self, TOOLS[n]) for n in self.tool_names]
        return list(self._tools)

    def call(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        spec = resolve(str(name))
        logged_name = spec.name if spec is not None else str(name)
        logged_args = dict(args) if isinstance(args, Mapping) else {"_raw": repr(args)[:500]}
        try:
            if spec is None or spec.name not in self.tool_names:
                offered = ", ".join(TOOLS[n].function_name for n in self.tool_names)
                raise ToolError(f"Unknown tool {name!r}; this task's tools are: {offered}")
            if not isinstance(args, Mapping):
                raise ToolError(f"Bad arguments for {spec.name}: expected an object of named arguments")
            result = ToolResult(ok=True, output=_text(spec.func(self.state, **parse_args(spec, dict(args)))))
        except ToolError as err:
            result = ToolResult(ok=False, output=str(err))
        except Exception as err:  # noqa: BLE001 -- a tool must never take the run down; the agent sees why
            result = ToolResult(ok=False, output=f"{type(err).__name__}: {err}")
        self._log.append(ActionRecord(name=logged_name, args=logged_args, ok=result.ok, output=result.output))
        return result

    def fork(self) -> WorkbenchEnvironment:
        return WorkbenchEnvironment(task_id=self.task_id, tool_names=self.tool_names, state=self.state.copy(),
                                    log=self._log)

    @property
    def actions(self) -> list[ActionRecord]:
        return list(self._log)

    def changes_state(self, name: str) -> bool:
        """WorkBench's ``tools_with_side_effects`` (either name form); an unknown name changes nothing."""
        spec = resolve(str(name))
        return spec is not None and spec.side_effects
