"""The agents' tools: a safe calculator and sandboxed Python.

The LangChain ``@tool`` objects carry names and argument schemas for models
with native tool calling; :func:`execute_tool` runs a call whatever protocol
it arrived by, and reports failures as ``ok=False`` instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.tools import tool

from benchmark.sandbox import SandboxUnavailable
from mas.run_settings import SandboxSettings


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. "12 * (3 + 4)"."""
    from mas.tools.calculator import evaluate as safe_eval

    return str(safe_eval(expression))


@tool
def python(code: str) -> str:
    """Run a short Python program in a sandbox and return what it prints."""
    raise NotImplementedError("executed by mas.tools.builtin.execute_tool")  # schema only


TOOLS = [calculator, python]


@dataclass(kw_only=True, frozen=True, slots=True)
class ToolOutcome:
    ok: bool
    output: str
    """Result text (or the error message when ``ok`` is False)."""


def _first_arg(args: dict[str, Any], *names: str) -> str:
    for n in names:
        if n in args:
            return str(args[n])
    if len(args) == 1:
        return str(next(iter(args.values())))
    raise ValueError(f"missing argument; expected one of {', '.join(names)}")


async def execute_tool(name: str, args: dict[str, Any], sandbox: SandboxSettings) -> ToolOutcome:
    """Run one tool call; unknown tools and bad arguments are failures, not exceptions."""
    try:
        if name == "calculator":
            from mas.tools.calculator import evaluate as safe_eval

            return ToolOutcome(ok=True, output=str(safe_eval(_first_arg(args, "expression", "expr", "input"))))
        if name == "python":
            from benchmark.sandbox import arun_python

            res = await arun_python(_first_arg(args, "code", "input"), timeout_s=sandbox.timeout_s,
                                    memory_mb=sandbox.memory_mb, isolation=sandbox.isolation)
            out = res.stdout if res.ok else (res.stderr or res.stdout or f"exit code {res.exit_code}")
            if res.timed_out:
                out = f"timed out after {sandbox.timeout_s} s"
            return ToolOutcome(ok=res.ok, output=out.strip()[:2000])
        return ToolOutcome(ok=False, output=f"unknown tool {name!r}; available: calculator, python")
    except SandboxUnavailable:
        raise  # the runtime's failure, not the model's: it ends the run (an infrastructure error)
    except Exception as err:  # the model sees the error and may try again
        return ToolOutcome(ok=False, output=f"{type(err).__name__}: {err}")
