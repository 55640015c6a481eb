"""How a WorkBench tool is declared: name, implementation, description, argument model.

Every argument of every WorkBench tool is an optional string (the tools check
what is missing and say so, e.g. "Event ID not provided."), so the argument
model is generated: each field ``str | None = None``.  Numbers are accepted
and turned into text (WorkBench recorded an agent's call as ``k="v"``, so a
duration of 30 and "30" were the same call); unknown arguments are rejected.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

if TYPE_CHECKING:
    from benchmark.workbench.state import WorkbenchState

CURRENT_TIME = "2023-11-30 00:00:00"
"""WorkBench's fixed "now" (a Thursday): sent emails carry it, tasks are phrased relative to it."""


class ToolError(Exception):
    """A call the tool rejects; the message (WorkBench's own wording) goes back to the agent."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    """WorkBench's name, ``<domain>.<function>``."""
    func: Callable[..., Any]
    """``func(state, **args)``: the result, or raises :class:`ToolError`."""
    description: str
    args_model: type[BaseModel]
    side_effects: bool
    """Whether the tool can change the state (WorkBench's ``tools_with_side_effects``)."""

    @property
    def domain(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def function_name(self) -> str:
        """The name models see: ``.`` is not allowed in OpenAI function names, so ``calendar__delete_event``."""
        return function_name(self.name)


def function_name(workbench_name: str) -> str:
    """``calendar.delete_event`` -> ``calendar__delete_event`` (matches ``^[a-zA-Z0-9_-]{1,64}$``)."""
    return workbench_name.replace(".", "__")


def _model_name(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[._]", name)) + "Args"


def tool(name: str, func: Callable[..., Any], description: str, /, *, side_effects: bool,
         **args: str) -> ToolSpec:
    """A :class:`ToolSpec` whose arguments are ``args`` (argument name -> description), all optional strings."""
    fields: dict[str, Any] = {a: (str | None, Field(None, description=d)) for a, d in args.items()}
    model = create_model(_model_name(name),
                         __config__=ConfigDict(extra="forbid", coerce_numbers_to_str=True), **fields)
    return ToolSpec(name, func, description, model, side_effects)


def json_schema(spec: ToolSpec) -> dict[str, Any]:
    """The argument schema shown to models: plain ``{"type": "string"}`` fields, none required.

    ``str | None`` would read as ``anyOf[string, null]``, which small models handle badly;
    ``None`` still validates (it means "not given").
    """
    schema = spec.args_model.model_json_schema()
    props = {}
    for key, prop in schema.get("properties", {}).items():
        props[key] = {"type": "string", "description": prop.get("description", "")}
    return {"type": "object", "properties": props, "additionalProperties": False,
            "description": spec.description}


def parse_args(spec: ToolSpec, args: dict[str, Any]) -> dict[str, str | None]:
    """Validated arguments, or :class:`ToolError` with a one-line reason naming the argument."""
    try:
        return spec.args_model.model_validate(args).model_dump()
    except ValidationError as exc:
        accepted = ", ".join(spec.args_model.model_fields)
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown argument {where!r} (accepted: {accepted})")
            else:
                problems.append(f"argument {where!r}: {err['msg']}")
        raise ToolError(f"Bad arguments for {spec.name}: " + "; ".join(problems)) from None


# ---------------------------------------------------------------- helpers the tools share

def parse_time(value: str, arg: str) -> datetime:
    """An ISO date or date-time (``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM:SS``); else :class:`ToolError`."""
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(f"Invalid {arg}: expected a date-time like 2023-11-30 09:00:00, got {value!r}.") from None


def next_id(state: WorkbenchState, table: str, width: int = 8) -> str:
    """The largest id + 1, zero-padded to ``width`` (0 pads nothing)."""
    top = state.table(table).max_id()
    return str(int(top) + 1 if top is not None else 0).zfill(width)


def get_field(state: WorkbenchState, table: str, key: str | None, field: str | None, noun: str) -> dict[str, Any]:
    """WorkBench's get-by-id: ``{field: value}`` of the row with id ``key``."""
    if not key:
        raise ToolError(f"{noun} ID not provided.")
    if not field:
        raise ToolError("Field not provided.")
    row = state.table(table).find(key)
    if row is None:
        raise ToolError(f"{noun} not found.")
    if field not in row:
        raise ToolError("Field not found.")
    return {field: row[field]}
