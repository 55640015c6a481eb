"""The agents' built-in tools (a safe calculator, sandboxed Python) and their executor."""

from mas.tools.builtin import TOOLS, ToolOutcome, execute_tool

__all__ = ["TOOLS", "ToolOutcome", "execute_tool"]
