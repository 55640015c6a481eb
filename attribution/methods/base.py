"""The method contract: what an attribution method receives and returns.

A method is an async callable ``(trajectory, ctx) -> Prediction`` built by a
factory registered by name in :data:`METHODS`::

    @register_method("random")
    def random_method(**options) -> Method:
        async def run(trajectory: Trajectory, ctx: MethodContext) -> Prediction: ...
        return run

Methods that call a model get it from ``ctx.model`` (``None`` when the CLI
was run without ``--model``; call :func:`require_model`), fit every prompt to
``ctx.context_window`` tokens and say how in ``Prediction.truncated``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from attribution.trajectory import Trajectory
from descriptor.errors import UserError


class MethodContext(BaseModel):
    """Everything a method may use besides the trajectory."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    model: Any = None
    """A LangChain ``BaseChatModel``, or None when no ``--model`` was given."""
    route: str | None = None
    """Name of the model route (for records only)."""
    context_window: int = Field(default=8192, ge=256)
    """Tokens the route's model accepts; prompts must fit (tokens)."""
    max_output_tokens: int = Field(default=512, ge=1)
    """Completion budget per call on this route (tokens)."""
    count_tokens: Any = None
    """``async (text) -> tokens`` by the served model's tokenizer (embedded route); None: chars / 4."""
    with_ground_truth: bool = True
    """Whether the method may show the task's reference answer to the model."""
    seed: int = 0


class Prediction(BaseModel):
    """A method's answer for one trajectory, with its cost."""

    agent: str | None = None
    """Predicted responsible agent (as named in the trajectory), None if none chosen."""
    step: int | None = None
    """Predicted decisive error step (0-based), None if none chosen."""
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    tokens: int = Field(default=0, ge=0)
    """Prompt plus completion tokens spent on this case (tokens)."""
    seconds: float = Field(default=0.0, ge=0.0)
    """Wall time of this case (s); the runner fills it in when the method leaves 0."""
    nfe: int = Field(default=0, ge=0)
    """Model calls made for this case."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Method-specific record (votes, candidates, reasons)."""
    truncated: bool | str = False
    """False if every prompt fit whole; otherwise how prompts were fitted (e.g. ``"windowed"``)."""


Method = Callable[[Trajectory, MethodContext], Awaitable[Prediction]]
MethodFactory = Callable[..., Method]

METHODS: dict[str, MethodFactory] = {}
"""Method name -> factory; factories take keyword options and return a :data:`Method`."""


def register_method(name: str) -> Callable[[MethodFactory], MethodFactory]:
    """Decorator adding a factory to :data:`METHODS` under ``name``."""

    def deco(factory: MethodFactory) -> MethodFactory:
        METHODS[name] = factory
        return factory

    return deco


def require_model(ctx: MethodContext, method: str) -> Any:
    """``ctx.model`` or a :class:`UserError` telling the user to pass ``--model``."""
    if ctx.model is None:
        raise UserError(f"method {method!r} needs a chat model: pass --model ROUTE (e.g. --model embedded)")
    return ctx.model


def approx_tokens(text: str) -> int:
    """Rough token count of ``text`` (4 characters per token), for fitting prompts (tokens)."""
    return (len(text) + 3) // 4


def usage_tokens(message: Any, prompt_text: str = "") -> int:
    """Tokens of one LangChain call: its ``usage_metadata`` when reported, else an estimate (tokens)."""
    usage = getattr(message, "usage_metadata", None) or {}
    total = usage.get("total_tokens") or (usage.get("input_tokens", 0) + usage.get("output_tokens", 0))
    if total:
        return int(total)
    meta = (getattr(message, "response_metadata", None) or {}).get("token_usage") or {}
    if meta.get("total_tokens"):
        return int(meta["total_tokens"])
    return approx_tokens(prompt_text) + approx_tokens(str(getattr(message, "content", "")))
