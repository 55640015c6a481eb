"""All WorkBench tools by name, which ones a task gets, and their LangChain form.

Names: WorkBench calls a tool ``<domain>.<function>`` (``calendar.delete_event``);
OpenAI function names must match ``^[a-zA-Z0-9_-]{1,64}$``, so models see
``calendar__delete_event`` (:func:`~benchmark.workbench.toolspec.function_name`).
Either form is accepted by :func:`resolve`; the action log, the evaluation and
the expected answers use WorkBench's.

Tool selection (option ``tools``): ``"all"`` gives every tool (27), ``"domain"``
the tools of the task's domains plus the company directory, as WorkBench's
``get_toolkits`` does.  Multi-domain rows name the CRM ``crm``; WorkBench
matched only ``customer_relationship_manager``, so its 30 ``crm`` tasks got no
CRM tools in the domain setting; here ``crm`` means the CRM.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from benchmark.workbench.analytics_tools import TOOLS as ANALYTICS_TOOLS
from benchmark.workbench.calendar_tools import TOOLS as CALENDAR_TOOLS
from benchmark.workbench.crm_tools import TOOLS as CRM_TOOLS
from benchmark.workbench.directory_tools import TOOLS as DIRECTORY_TOOLS
from benchmark.workbench.email_tools import TOOLS as EMAIL_TOOLS
from benchmark.workbench.project_tools import TOOLS as PROJECT_TOOLS
from benchmark.workbench.toolspec import ToolSpec, json_schema

if TYPE_CHECKING:
    from langchain_core.tools import StructuredTool

    from benchmark.environment import Environment

DOMAINS = ("calendar", "email", "analytics", "project_management", "customer_relationship_manager")
DIRECTORY = "company_directory"
DOMAIN_ALIASES = {"crm": "customer_relationship_manager"}
Selection = Literal["domain", "all"]
SELECTIONS: tuple[Selection, ...] = ("domain", "all")

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in (
    *CALENDAR_TOOLS, *EMAIL_TOOLS, *ANALYTICS_TOOLS, *PROJECT_TOOLS, *CRM_TOOLS, *DIRECTORY_TOOLS)}
_BY_FUNCTION = {spec.function_name: spec for spec in TOOLS.values()}


def resolve(name: str) -> ToolSpec | None:
    """The tool called ``name`` (``calendar.delete_event`` or ``calendar__delete_event``), else None."""
    return TOOLS.get(name) or _BY_FUNCTION.get(name)


def canonical_domains(domains: Iterable[str]) -> tuple[str, ...]:
    """Domain names as the toolkits spell them (``crm`` -> ``customer_relationship_manager``)."""
    out = []
    for d in domains:
        d = DOMAIN_ALIASES.get(d, d)
        if d not in DOMAINS:
            raise ValueError(f"unknown WorkBench domain {d!r}; known: {', '.join(DOMAINS)}")
        if d not in out:
            out.append(d)
    return tuple(out)


def select_tools(selection: Selection, domains: Iterable[str]) -> tuple[str, ...]:
    """WorkBench names of the tools a task gets, in registry order."""
    if selection == "all":
        return tuple(TOOLS)
    wanted = {*canonical_domains(domains), DIRECTORY}
    return tuple(name for name, spec in TOOLS.items() if spec.domain in wanted)


def langchain_tool(env: Environment, spec: ToolSpec) -> StructuredTool:
    """``spec`` as a LangChain tool acting on ``env``.

    The argument schema is the JSON schema of the tool's pydantic model, and the
    arguments reach the environment's ``call`` as sent, which validates
    them: so a call with bad arguments is logged like any other.  A failed call
    raises ``ToolException``, which LangChain turns into the tool's output (a
    ``ToolMessage`` with ``status="error"`` when invoked with a tool call).
    """
    from langchain_core.tools import StructuredTool, ToolException

    def run(**kwargs: object) -> str:
        result = env.call(spec.name, kwargs)
        if not result.ok:
            raise ToolException(result.output)
        return result.output

    return StructuredTool.from_function(func=run, name=spec.function_name, description=spec.description,
                                        args_schema=json_schema(spec), handle_tool_error=True)
