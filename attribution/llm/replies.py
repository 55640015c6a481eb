"""Reply contracts of the attribution prompts: pydantic models, turned into JSON schemas for constrained decoding.

Contracts whose choices depend on the case (the agents of a log, the range of
its steps) are built per case with :func:`contract`; the fixed ones are plain
classes. :func:`schema_of` is :func:`mas.llm.schema.bounded_schema`, the
runtime's one way from a model to a schema. Field order is the order of the
reply: reasons before answers (small models answer better after saying why).
Replies are parsed tolerantly by each method, not validated against these
models: the schema only shapes what a constrained server generates.

>>> R = contract("Pick", reason=text(), agent=one_of(["Coder", "Planner"]), step=step_in(0, 4))
>>> s = schema_of(R)
>>> s["properties"]["agent"]["enum"], s["properties"]["step"]["maximum"], s["additionalProperties"]
(['Coder', 'Planner'], 4, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from mas.llm.schema import bounded_schema


class Reply(BaseModel):
    """Base of every reply contract: no properties besides the listed ones."""

    model_config = ConfigDict(extra="forbid")


def text(max_len: int = 160) -> Any:
    """A free-text field of at most ``max_len`` characters."""
    return Annotated[str, Field(max_length=max_len)]


def one_of(values: Sequence[Any]) -> Any:
    """A field taking one of ``values`` (agent names, step numbers, "yes"/"no")."""
    return Literal[tuple(values)]  # type: ignore[valid-type]


def step_in(lo: int, hi: int) -> Any:
    """A step number in ``[lo, hi]``."""
    return Annotated[int, Field(ge=lo, le=max(lo, hi))]


def unit() -> Any:
    """A probability or confidence in [0, 1]."""
    return Annotated[float, Field(ge=0, le=1)]


def many(item: Any, max_items: int, min_items: int = 0) -> Any:
    """A list of ``item`` with ``min_items`` to ``max_items`` entries."""
    return Annotated[list[item], Field(min_length=min_items, max_length=max_items)]  # type: ignore[valid-type]


def contract(model_name: str, /, **fields: Any) -> type[Reply]:
    """A reply model with every field required, in the given order."""
    return create_model(model_name, __base__=Reply, **{k: (v, ...) for k, v in fields.items()})


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a server constrains the reply to (nested models inlined, strings and lists bounded)."""
    return bounded_schema(model)


YesNo = one_of(["yes", "no"])
