"""The tools an agent gets: the built-in calculator and Python, or its environment's tools.

A :class:`Toolbox` carries the tools as LangChain tools (bound for models with
native tool calling), their description for the text protocol (small local
models write a tool call as a fenced JSON block, see
:func:`mas.llm.tool_calls.text_tool_calls`), and runs a call whichever protocol it
came by. A failed call is ``ok=False`` with the reason as output, never an
exception out of the run.

A run on a benchmark with an environment gets the environment's tools instead
of the built-in ones (``benchmarks.workbench.tools = "domain" | "all"`` picks
which); every call goes through :meth:`~benchmark.environment.Environment.call`
and lands in the environment's action log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from benchmark.environment import Environment
from mas.run_settings import SandboxSettings
from mas.tools.builtin import TOOLS, execute_tool
from mas.topologies.prompts import TOOL_PROTOCOL

ENVIRONMENT_PROTOCOL = """You act on the task's environment with these tools (arguments are strings):
{tools}
To call a tool, end your reply with a JSON block like
```json
{{"name": "<tool name>", "arguments": {{"<argument>": "<value>"}}}}
```
and wait for the result. Make one call at a time, look up what you need before you change anything, make only
the changes the task asks for, and never invent tool results."""


@dataclass(kw_only=True, frozen=True, slots=True)
class ToolOutput:
    """What one call returned."""

    ok: bool
    output: str
    state_changing: bool | None = None
    """True when an accepted call of a tool that changes the environment; None without an environment."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Toolbox:
    """An agent's tools: LangChain tools to bind, their text-protocol description, and a way to run them."""

    tools: tuple[Any, ...]
    protocol: str | None
    """The system prompt's description of the tools and of the text protocol (None: no tools)."""
    sandbox: SandboxSettings
    environment: Environment | None = None

    async def run(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run one call; unknown tools and bad arguments come back as ``ok=False``."""
        if self.environment is None:
            res = await execute_tool(name, arguments, self.sandbox)
            return ToolOutput(ok=res.ok, output=res.output)
        result = self.environment.call(name, arguments)
        return ToolOutput(ok=result.ok, output=result.output,
                          state_changing=result.ok and self.environment.changes_state(name))


def describe_tool(tool: Any) -> str:
    """One line of the text protocol: name, description, and the arguments with their descriptions."""
    args = {k: v.get("description", "") for k, v in (tool.args or {}).items()}
    return f"- {tool.name}: {tool.description} Arguments: {json.dumps(args, ensure_ascii=False)}"


def toolbox_for(sandbox: SandboxSettings, environment: Environment | None = None, *, builtin: bool = True) -> Toolbox:
    """The environment's tools when there is one, else the built-in calculator and Python (none when not
    ``builtin``: ``mas.builtin_tools = false``)."""
    if environment is None:
        if not builtin:
            return Toolbox(tools=(), protocol=None, sandbox=sandbox)
        return Toolbox(tools=tuple(TOOLS), protocol=TOOL_PROTOCOL, sandbox=sandbox)
    tools = tuple(environment.tools())
    return Toolbox(tools=tools, protocol=ENVIRONMENT_PROTOCOL.format(tools="\n".join(map(describe_tool, tools))),
                   sandbox=sandbox, environment=environment)
