"""Reply contracts as JSON schemas for constrained decoding, from pydantic models.

A reply contract is a pydantic model; :func:`bounded_schema` turns it into the
schema llama-server compiles into a grammar. A constrained small model wrote
until the token limit (an endless explanation, index lists that never closed),
and a reply cut there is unusable, so every string and array gets a length
bound unless the model sets its own. The bounds only shape generation:
replies are validated (or parsed tolerantly) by the callers.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

MAX_STRING = 400
"""Characters of a string field that sets no ``max_length``."""
MAX_ITEMS = 12
"""Items of an array field that sets no ``max_length``."""


def bounded_schema(model: type[BaseModel], *, max_string: int = MAX_STRING, max_items: int = MAX_ITEMS) -> dict[str, Any]:
    """``model``'s JSON schema with nested models inlined and every string and array bounded.

    >>> from pydantic import Field
    >>> class R(BaseModel):
    ...     reason: str
    ...     picks: list[int] = Field(max_length=2)
    >>> s = bounded_schema(R)
    >>> s["properties"]["reason"]["maxLength"], s["properties"]["picks"]["maxItems"]
    (400, 2)
    """
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str):
            target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        out = {k: walk(v) for k, v in node.items()}
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            out.setdefault("maxLength", max_string)
        elif out.get("type") == "array":
            out.setdefault("maxItems", max_items)
        return out

    return walk(schema)
