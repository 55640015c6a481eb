"""One factory from a configured route to a LangChain chat model, and the models of one run.

The route's ``provider`` names an entry of :data:`mas.llm.providers.PROVIDERS` (``openai``, ``embedded``,
``langchain``, and what plugins add: the scripted test double is one), which builds the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from descriptor.errors import UserError
from mas.config import ExperimentConfig, ModelRoute, register_route_secrets
from mas.llm.providers import PROVIDERS, BoundModel, MalformedReplyError, ProviderRequest, args_key, check_provider

__all__ = ["BoundModel", "MalformedReplyError", "ModelSet", "ProviderError", "make_chat_model"]


class ProviderError(UserError):
    """A route's provider raised while building its model."""


def make_chat_model(
    cfg: ExperimentConfig,
    route_name: str = "default",
    *,
    seed: int | None = None,
    route: ModelRoute | None = None,
    provider_args: Mapping[str, Any] | None = None,
) -> BoundModel:
    """Build the chat model for ``route_name`` (or an explicit ``route``) with its provider.

    ``provider_args`` are the provider's own per-run arguments. Raises :class:`mas.config.ConfigError` for an
    unknown provider or a hosted route's missing API key, :class:`mas.serving.server.EmbeddedServerError`
    when the local server cannot start, and :class:`ProviderError` when the provider raises anything else.
    """
    route = route or cfg.route(route_name)
    check_provider(route_name, route)
    request = ProviderRequest(cfg=cfg, route_name=route_name, route=route, seed=cfg.seed if seed is None else seed,
                              args=provider_args or {})
    try:
        return PROVIDERS.get(route.provider)(request)
    except UserError:
        raise
    except Exception as err:
        # A provider that cannot build its model (a plugin's missing key, a bad argument) fails the setup, not
        # the task: as a UserError the run ends as an infrastructure error (no task result, redone next time),
        # where a plain exception inside the graph was counted as the system failing the task.
        raise ProviderError(f"models.{route_name}: provider {route.provider!r} could not build its model: "
                            f"{type(err).__name__}: {err}") from err


class ModelSet:
    """The models of one run, built lazily per route and shared by the roles that use it."""

    def __init__(self, cfg: ExperimentConfig, *, seed: int,
                 provider_args: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        register_route_secrets(cfg)  # a config unpickled on a dask worker was never validated there
        self.cfg = cfg
        self.seed = seed
        self.provider_args = dict(provider_args or {})
        """Provider name -> that provider's own per-run arguments (the scripted double's injection plan and
        the task's fields, say); a provider reads only its own (or, wrapping another, that one's: ``args_of``)."""
        self._cache: dict[str, BoundModel] = {}

    def reseeded(self, offset: int) -> ModelSet:
        """The same routes with seed ``seed + offset`` (independent samples of one run)."""
        return ModelSet(self.cfg, seed=self.seed + offset, provider_args=self.provider_args)

    def for_role(self, role: str) -> BoundModel:
        """The model an agent in ``role`` uses (``judge`` falls back to ``default``)."""
        # Keyed by route name, not route object: a built-in route named in
        # ``roles`` is a fresh object on every lookup and must still be built once.
        name = self.cfg.route_name_for_role(role)
        if name not in self._cache:
            route = self.cfg.route(name)
            check_provider(name, route)
            self._cache[name] = make_chat_model(self.cfg, name, seed=self.seed, route=route,
                                                provider_args=self.provider_args.get(args_key(route.provider)))
        return self._cache[name]

    def labels(self) -> dict[str, str]:
        """Route name -> model label, for metadata."""
        return {b.name: b.model_label for b in self._cache.values()}
