"""The method contract: what an attribution method receives and returns.

A method is an async callable ``(trajectory, ctx) -> Prediction`` built by a
factory registered by name in :data:`METHODS`::

    @register_method("random")
    def random_method(**options) -> Method:
        async def run(trajectory: Trajectory, ctx: MethodContext) -> Prediction: ...
        return run

Methods that call a model get it from ``ctx.model`` (``None`` when the CLI
was run without ``--model``; call :func:`require_model`), call it through
:mod:`attribution.llm.calls` (the runtime's call layer), fit every prompt to
``ctx.context_window`` tokens and say how in ``Prediction.truncated``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from attribution.sources.trajectory import Trajectory
from descriptor.errors import UserError
from descriptor.registry import Registry
from mas.llm.models import BoundModel


class MethodContext(BaseModel):
    """Everything a method may use besides the trajectory."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    model: Any = None
    """A :class:`mas.llm.models.BoundModel` (a chat model with its route), or None when no ``--model`` was given."""
    route: str | None = None
    """Name of the model route (for records only)."""
    context_window: int = Field(default=8192, ge=256)
    """Tokens the route's model accepts; prompts must fit (tokens)."""
    max_output_tokens: int = Field(default=512, ge=1)
    """Completion budget per call on this route (tokens)."""
    count_tokens: Any = None
    """``async (text) -> tokens`` measuring fitted prompts; None: the embedded server's tokenizer on that
    route, else the estimate alone (see :mod:`attribution.llm.calls`)."""
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

METHODS: Registry[MethodFactory] = Registry("method", "mas_econ.methods")
"""Method name -> factory; factories take keyword options and return a :data:`Method`. Filled by the method
modules (:func:`register_method`), installed packages (entry-point group ``mas_econ.methods``) and plugins."""


def register_method(name: str) -> Callable[[MethodFactory], MethodFactory]:
    """Decorator adding a factory to :data:`METHODS` under ``name`` (a name taken twice is an error)."""
    return METHODS.register(name)


def require_model(ctx: Any, method: str) -> BoundModel:
    """``ctx.model`` (a :class:`~mas.llm.models.BoundModel`) or a :class:`UserError` telling the user to pass ``--model``."""
    if ctx.model is None:
        raise UserError(f"method {method!r} needs a chat model: pass --model ROUTE (e.g. --model embedded)")
    if not isinstance(ctx.model, BoundModel):
        raise TypeError(f"{method}: the context's model must be a mas.llm.models.BoundModel, got {type(ctx.model).__name__}")
    return ctx.model
