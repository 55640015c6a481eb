"""One factory from a configured route to a LangChain chat model.

``openai`` routes are any OpenAI-compatible endpoint through ``ChatOpenAI``;
``embedded`` starts (or reuses) the local llama.cpp server and points
``ChatOpenAI`` at it; ``scripted`` is the deterministic test double and is
only ever used when a route names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel

from mas.config import ExperimentConfig, ModelRoute, register_route_secrets, require_api_key
from mas.llm.limits import shared_rate_limiter, slot_limited_client
from mas.scripted.model import InjectionPlan, ScriptedChatModel

if TYPE_CHECKING:
    from mas.serving.server import ServerHandle


class MalformedReplyError(RuntimeError):
    """The endpoint answered (HTTP 200) with a body that is no chat completion: bad or empty JSON, HTML, an
    error object, no choices. Retried like a 5xx (:mod:`mas.llm.call`)."""


def _checked_chat_openai() -> type:
    """``ChatOpenAI`` whose reply parsing turns a malformed body into :class:`MalformedReplyError`.

    LangChain raises ``ValueError``/``TypeError``/``IndexError`` from deep in
    its parser for such bodies, indistinguishable from a bug; here they get
    one name the retry logic knows.
    """
    from langchain_openai import ChatOpenAI

    class CheckedChatOpenAI(ChatOpenAI):
        def _create_chat_result(self, response: Any, generation_info: dict[str, Any] | None = None) -> Any:
            try:
                result = super()._create_chat_result(response, generation_info)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
                raise MalformedReplyError(f"malformed reply ({type(err).__name__}: {err})"[:1000]) from err
            if not result.generations:
                raise MalformedReplyError("malformed reply (no choices)")
            return result

    return CheckedChatOpenAI


@dataclass(kw_only=True, slots=True)
class BoundModel:
    """A chat model with the route it came from (prices, limits, quirks)."""

    name: str
    """Route name (``default``, ``judge``, ...)."""
    route: ModelRoute
    model: BaseChatModel
    model_label: str
    """What to record as ``gen_ai.request.model``."""
    base_url: str | None = None
    server: ServerHandle | None = None
    """The local llama-server behind an ``embedded`` route (to name its exit when calls fail)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def provider(self) -> str:
        return self.route.provider

    def structured_output_mode(self) -> str:
        """How to ask for JSON: ``json_schema`` (llama-server), ``json_object`` (hosted) or ``prompt``."""
        return {"embedded": "json_schema", "openai": "json_object"}.get(self.route.provider, "prompt")


def make_chat_model(
    cfg: ExperimentConfig,
    route_name: str = "default",
    *,
    seed: int | None = None,
    injection: InjectionPlan | None = None,
    route: ModelRoute | None = None,
    oracle_actions: list[dict[str, Any]] | None = None,
) -> BoundModel:
    """Build the chat model for ``route_name`` (or an explicit ``route``).

    Raises :class:`mas.config.ConfigError` when a hosted route's API key is
    missing, and :class:`mas.serving.server.EmbeddedServerError` when the local
    server cannot start. ``oracle_actions`` (the task's reference actions) reach
    the scripted double only, which replays them (see :mod:`mas.scripted.workbench`).
    """
    route = route or cfg.route(route_name)
    seed = cfg.seed if seed is None else seed
    if route.provider == "scripted":
        import mas.scripted.responders  # noqa: F401  (registers every contract's answers)

        variant = route.model if route.model.startswith("scripted") else "scripted"
        model = ScriptedChatModel(seed=seed, variant=variant, latency_ms=route.scripted_latency_ms,
                                  injection=injection, max_concurrent=route.rate_limit.max_concurrent,
                                  oracle_actions=oracle_actions)
        return BoundModel(name=route_name, route=route, model=model, model_label=variant)

    ChatOpenAI = _checked_chat_openai()  # noqa: N806

    extra_body: dict[str, Any] = {}
    handle = None
    if route.provider == "embedded":
        from mas.serving.server import ensure_server

        handle = ensure_server(cfg.embedded)
        base_url, model_name, api_key = handle.base_url, handle.model, "sk-local-no-key"
        # One request can use at most one slot's share of the server's context.
        route = route.model_copy(update={"context_window": min(route.context_window, handle.ctx_per_slot)})
        # llama-server reads max_tokens; ChatOpenAI sends max_completion_tokens.
        extra_body["max_tokens"] = route.max_tokens
        extra_body["cache_prompt"] = True
    else:
        api_key = require_api_key(route, route_name) or "sk-local-no-key"
        base_url, model_name = route.base_url, route.model
    limit = route.rate_limit.max_concurrent
    model = ChatOpenAI(
        model=model_name,
        base_url=base_url,
        api_key=api_key,
        temperature=route.temperature,
        max_tokens=route.max_tokens,
        timeout=route.request_timeout_s(),
        max_retries=0,  # mas.llm.call retries, so each retry is traced
        seed=seed,
        rate_limiter=shared_rate_limiter(route, base_url, model_name),
        stream_usage=True,
        extra_body=extra_body or None,
        http_async_client=slot_limited_client(f"{base_url}|{model_name}", limit, route.request_timeout_s()),
    )
    return BoundModel(name=route_name, route=route, model=model, model_label=model_name, base_url=base_url,
                      server=handle)


class ModelSet:
    """The models of one run, built lazily per route and shared by the roles that use it."""

    def __init__(self, cfg: ExperimentConfig, *, seed: int, injection: InjectionPlan | None = None,
                 oracle_actions: list[dict[str, Any]] | None = None) -> None:
        register_route_secrets(cfg)  # a config unpickled on a dask worker was never validated there
        self.cfg = cfg
        self.seed = seed
        self.injection = injection
        self.oracle_actions = oracle_actions
        """The task's reference actions, for the scripted double only (it replays them)."""
        self._cache: dict[str, BoundModel] = {}

    def reseeded(self, offset: int) -> ModelSet:
        """The same routes with seed ``seed + offset`` (independent samples of one run)."""
        return ModelSet(self.cfg, seed=self.seed + offset, injection=self.injection, oracle_actions=self.oracle_actions)

    def for_role(self, role: str) -> BoundModel:
        """The model an agent in ``role`` uses (``judge`` falls back to ``default``)."""
        # Keyed by route name, not route object: a built-in route named in
        # ``roles`` is a fresh object on every lookup and must still be built once.
        name = self.cfg.route_name_for_role(role)
        if name not in self._cache:
            self._cache[name] = make_chat_model(self.cfg, name, seed=self.seed, injection=self.injection,
                                                route=self.cfg.route(name), oracle_actions=self.oracle_actions)
        return self._cache[name]

    def labels(self) -> dict[str, str]:
        """Route name -> model label, for metadata."""
        return {b.name: b.model_label for b in self._cache.values()}
