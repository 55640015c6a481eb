"""Providers: what turns a configured route into a LangChain chat model, one registry entry each.

A provider is a function ``(ProviderRequest) -> BoundModel`` registered in :data:`PROVIDERS` under the name a
route's ``provider`` field gives. Built in here: ``openai`` (any OpenAI-compatible endpoint through
``ChatOpenAI``), ``embedded`` (the local llama.cpp server, started or reused) and ``langchain`` (any chat model
``langchain.chat_models.init_chat_model`` builds: ``model = "anthropic:claude-..."``, ``"google_genai:..."``,
``"ollama:..."``; its integration package installed as an extra). Installed packages add providers through the
entry-point group ``mas_econ.providers`` (the scripted test double is one, declared in ``pyproject.toml``), other
modules with ``@PROVIDERS.register("name")`` and ``--plugin``.

Whatever the provider, every call goes through :func:`mas.llm.call.call_llm`: tracing, retries, rate limits
(``requests_per_minute`` as the chat model's ``rate_limiter``), redaction of the route's key and usage
accounting (``usage_metadata``, else counted) are the same.

>>> from mas.config import ExperimentConfig, ModelRoute
>>> cfg = ExperimentConfig(models={"default": ModelRoute(provider="ollama", model="x")})
>>> check_providers(cfg)
Traceback (most recent call last):
...
mas.config.ConfigError: models.default.provider: unknown provider 'ollama'; known: embedded, langchain, openai...
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.runnables import RunnableBinding

from descriptor.registry import Registry
from mas.config import ConfigError, ExperimentConfig, ModelRoute, require_api_key
from mas.llm.limits import endpoint_slot, shared_rate_limiter, slot_limited_client

if TYPE_CHECKING:
    from mas.serving.server import ServerHandle


class MalformedReplyError(RuntimeError):
    """The endpoint answered (HTTP 200) with a body that is no chat completion: bad or empty JSON, HTML, an
    error object, no choices. Retried like a 5xx (:mod:`mas.llm.call`)."""


@dataclass(kw_only=True, slots=True)
class BoundModel:
    """A chat model with the route it came from (prices, limits, quirks)."""

    name: str
    """Route name (``default``, ``judge``, ...)."""
    route: ModelRoute
    model: BaseChatModel
    model_label: str
    """What to record as the events' ``model`` (``gen_ai.request.model``)."""
    base_url: str | None = None
    server: ServerHandle | None = None
    """The local llama-server behind an ``embedded`` route (to name its exit when calls fail)."""
    json_mode: str = "prompt"
    """How to ask for JSON: ``json_schema`` (llama-server), ``json_object`` (OpenAI-compatible) or ``prompt``."""
    native_tools: bool = True
    """False: tools are offered and called as text (fenced JSON, :mod:`mas.llm.call`), not through the
    provider's ``tool_calls``: small local models never return native ones, some chat models cannot bind tools."""
    judges: bool = True
    """False: this model does not play the LLM judge; the runtime's judge decides lexically without calling it
    (a test double's mock mode, see :mod:`mas.topologies.judge`)."""
    cacheable: bool = True
    """False: its replies depend on per-run state no request shows (the scripted double's injection plan), so the
    response cache neither answers nor stores its calls (:mod:`mas.llm.cache`)."""
    extra: dict[str, Any] = field(default_factory=dict)
    tool_bindings: dict[tuple[int, ...], tuple[tuple[Any, dict[str, Any]], list[Any]]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    """What :meth:`with_tools` returns, by the tools' ids (each kept with its tools, so no id is reused)."""

    @property
    def provider(self) -> str:
        return self.route.provider

    def with_tools(self, tools: list[Any]) -> tuple[Any, dict[str, Any]]:
        """What to invoke for a call offering ``tools`` natively, and the invoke kwargs to add: the model and the
        kwargs ``model.bind_tools(tools)`` bound (the tools' schemas, a tool choice), or, when that binding also
        carries a config of its own, the binding itself and none.

        Invoking the model with a plain binding's kwargs is what invoking the binding does, without its two
        config merges (~0.1 ms of each call). Bound once per list of tool objects: binding converts
        every tool's schema, and an agent offers the same tools on each of its calls."""
        key = tuple(map(id, tools))
        hit = self.tool_bindings.get(key)
        if hit is None:
            binding = self.model.bind_tools(tools)
            plain = (isinstance(binding, RunnableBinding) and binding.bound is self.model and not binding.config
                     and not binding.config_factories)
            parts = (self.model, dict(binding.kwargs)) if plain else (binding, {})
            hit = self.tool_bindings[key] = (parts, list(tools))
        return hit[0]

    def structured_output_mode(self) -> str:
        """How to ask for JSON (see :attr:`json_mode`)."""
        return self.json_mode


@dataclass(kw_only=True, slots=True, frozen=True)
class ProviderRequest:
    """What a provider builds a route's chat model from."""

    cfg: ExperimentConfig
    route_name: str
    route: ModelRoute
    seed: int
    """The run's seed, for providers that take one."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """This provider's own per-run arguments (:class:`mas.llm.models.ModelSet`'s ``provider_args``)."""


Provider = Callable[[ProviderRequest], BoundModel]
PROVIDERS: Registry[Provider] = Registry("provider", "mas_econ.providers")
"""Provider name (a route's ``provider``) -> the function building its chat model."""


def args_key(provider: str) -> str:
    """Whose per-run arguments ``provider`` receives: its own, or those of the provider it wraps (a provider
    function's ``args_of`` attribute: a test's own scripted provider takes the ``scripted`` double's)."""
    return str(getattr(PROVIDERS.get(provider), "args_of", provider))


def check_provider(route_name: str, route: ModelRoute) -> None:
    """:class:`ConfigError` when no registered provider answers to ``route.provider``, naming the known ones.

    Checked here rather than in :mod:`mas.config`: providers are registered by modules (and packages) above the
    config, which the config must not import."""
    if route.provider not in PROVIDERS:
        raise ConfigError(f"models.{route_name}.provider: unknown provider {route.provider!r}; "
                          f"known: {', '.join(PROVIDERS.names())}")


def check_providers(cfg: ExperimentConfig) -> None:
    """:func:`check_provider` for every configured route."""
    for name, route in cfg.models.items():
        check_provider(name, route)


@functools.cache
def _checked_chat_openai() -> type:
    """``ChatOpenAI`` whose reply parsing turns a malformed body into :class:`MalformedReplyError`.

    LangChain raises ``ValueError``/``TypeError``/``IndexError`` from deep in
    its parser for such bodies, indistinguishable from a bug; here they get
    one name the retry logic knows. Made once per process: pydantic builds a
    class's schema when the class is made (~3 ms of CPU, more than the rest
    of a run's model construction).
    """
    from langchain_openai import ChatOpenAI

    class CheckedChatOpenAI(ChatOpenAI):
        def _create_chat_result(self, response: Any, generation_info: dict[str, Any] | None = None) -> Any:
            try:
                result = super()._create_chat_result(_object_arguments(response), generation_info)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
                raise MalformedReplyError(f"malformed reply ({type(err).__name__}: {err})"[:1000]) from err
            if not result.generations:
                raise MalformedReplyError("malformed reply (no choices)")
            return result

    return CheckedChatOpenAI


NOT_AN_OBJECT = "not a JSON object: "
"""Put before a tool call's arguments that are JSON but no object (``["a"]``, ``5``), so LangChain reads the call
as invalid (the model's failure, answered like arguments that are no JSON) instead of failing to build the reply,
which was counted as a malformed reply and, after the retries, an infrastructure error."""


def _object_arguments(response: Any) -> Any:
    """``response`` (a chat completion) with every tool call's arguments that parse as JSON but not as an object
    marked :data:`NOT_AN_OBJECT`; anything else as it came."""
    body = response if isinstance(response, dict) else getattr(response, "model_dump", lambda: response)()
    if not isinstance(body, dict):
        return response
    changed = False
    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        for call in (message or {}).get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            args = fn.get("arguments") if isinstance(fn, dict) else None
            if not isinstance(args, str) or not args.strip():
                continue
            try:
                parsed = json.loads(args)
            except ValueError:
                continue  # not JSON: LangChain already reads it as an invalid call
            if parsed and not isinstance(parsed, dict):  # LangChain reads null, 0, "" and [] as no arguments
                fn["arguments"], changed = NOT_AN_OBJECT + args, True
    return body if changed else response


_shared_models: dict[tuple[Any, ...], BaseChatModel] = {}
_shared_lock = threading.Lock()


def _chat_openai(req: ProviderRequest, route: ModelRoute, base_url: str | None, model_name: str, api_key: str,
                 extra_body: dict[str, Any]) -> BaseChatModel:
    """The route's ``ChatOpenAI`` for one run: a copy, with the run's seed, of the one model this process keeps
    for the route (built on its first run), so every run shares its SDK clients and their connection pool.

    Building a ``ChatOpenAI`` builds two SDK clients (~0.3 ms); a copy sets one field (~3 µs)."""
    limit = route.rate_limit.max_concurrent
    timeout = route.request_timeout_s()
    key = (base_url, model_name, api_key, route.temperature, route.max_tokens, timeout,
           route.rate_limit.requests_per_minute, limit, json.dumps(extra_body, sort_keys=True))
    with _shared_lock:
        shared = _shared_models.get(key)
        if shared is None:
            shared = _shared_models[key] = _checked_chat_openai()(
                model=model_name,
                base_url=base_url,
                api_key=api_key,
                temperature=route.temperature,
                max_tokens=route.max_tokens,
                timeout=timeout,
                max_retries=0,  # mas.llm.call retries, so each retry is traced
                rate_limiter=shared_rate_limiter(route, base_url, model_name),
                stream_usage=True,
                extra_body=extra_body or None,
                http_async_client=slot_limited_client(f"{base_url}|{model_name}", limit, timeout),
            )
    return shared.model_copy(update={"seed": req.seed})


@PROVIDERS.register("openai")
def openai_provider(req: ProviderRequest) -> BoundModel:
    """Any OpenAI-compatible endpoint (OpenAI, OpenRouter, vLLM, a llama.cpp server) through ``ChatOpenAI``."""
    route = req.route
    api_key = require_api_key(route, req.route_name) or "sk-local-no-key"
    model = _chat_openai(req, route, route.base_url, route.model, api_key, {})
    return BoundModel(name=req.route_name, route=route, model=model, model_label=route.model,
                      base_url=route.base_url, json_mode="json_object")


@PROVIDERS.register("embedded")
def embedded_provider(req: ProviderRequest) -> BoundModel:
    """The local llama.cpp server (started, or reused when it runs), through ``ChatOpenAI``.

    Raises :class:`mas.serving.server.EmbeddedServerError` when the server cannot start."""
    from mas.serving.server import ensure_server

    handle = ensure_server(req.cfg.embedded)
    # One request can use at most one slot's share of the server's context. Requests wait for one of the server's
    # slots here rather than in its queue, so the request timeout (sized to the longest call, from this context
    # window) runs only while the server works on the request.
    slots = handle.record.parallel
    limit = req.route.rate_limit.max_concurrent
    route = req.route.model_copy(update={
        "context_window": min(req.route.context_window, handle.ctx_per_slot),
        "rate_limit": req.route.rate_limit.model_copy(update={"max_concurrent": min(limit or slots, slots)})})
    # llama-server reads max_tokens; ChatOpenAI sends max_completion_tokens.
    extra_body = {"max_tokens": route.max_tokens, "cache_prompt": True}
    model = _chat_openai(req, route, handle.base_url, handle.model, "sk-local-no-key", extra_body)
    return BoundModel(name=req.route_name, route=route, model=model, model_label=handle.model,
                      base_url=handle.base_url, server=handle, json_mode="json_schema", native_tools=False)


_SLOTTED: dict[tuple[type, str, int], type] = {}


def _hold_slots(model: BaseChatModel, endpoint: str, limit: int) -> None:
    """Make ``model`` hold one of the endpoint's ``limit`` slots (``rate_limit.max_concurrent``) per call.

    An integration's HTTP client is its own, so the slot is held around the model's ``_agenerate`` (the whole
    request and its parsing) rather than in the transport as for ``openai`` routes: the model's class becomes a
    subclass that does only this (no new fields, so the instance keeps its clients and settings).
    """
    key = (type(model), endpoint, limit)
    if key not in _SLOTTED:
        async def _agenerate(self: Any, *args: Any, **kwargs: Any) -> Any:
            async with endpoint_slot(endpoint, limit):
                return await super(slotted, self)._agenerate(*args, **kwargs)

        slotted = type(f"SlotLimited{key[0].__name__}", (key[0],), {"_agenerate": _agenerate, "__module__": __name__})
        _SLOTTED[key] = slotted
    model.__class__ = _SLOTTED[key]


@PROVIDERS.register("langchain")
def langchain_provider(req: ProviderRequest) -> BoundModel:
    """Any chat model ``init_chat_model`` builds from ``model = "<langchain provider>:<model>"``.

    The route's ``temperature``, ``max_tokens`` and timeout are passed on, retries are left to
    :mod:`mas.llm.call` (``max_retries=0``), ``requests_per_minute`` is the model's ``rate_limiter``;
    ``base_url`` and the key named by ``api_key_env`` (required when set) are passed when configured, else the
    integration reads its own defaults. Name the key with ``api_key_env`` so redaction knows it.
    """
    route = req.route
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as err:
        raise ConfigError(f"models.{req.route_name}: provider 'langchain' needs the package langchain "
                          f"(pip install 'mas-econ[langchain]'): {err}") from None
    kwargs: dict[str, Any] = {"temperature": route.temperature, "max_tokens": route.max_tokens,
                              "timeout": route.request_timeout_s(), "max_retries": 0,
                              "rate_limiter": shared_rate_limiter(route, route.base_url, route.model)}
    if route.base_url is not None:
        kwargs["base_url"] = route.base_url
    if route.api_key_env is not None:
        kwargs["api_key"] = require_api_key(route, req.route_name)
    try:
        model = init_chat_model(route.model, **kwargs)
    except (ValueError, ImportError) as err:  # unknown provider prefix, or its integration not installed
        raise ConfigError(f"models.{req.route_name}.model: init_chat_model cannot build {route.model!r}: "
                          f"{str(err).splitlines()[0]}") from None
    if route.rate_limit.max_concurrent is not None:
        _hold_slots(model, f"{route.base_url}|{route.model}", route.rate_limit.max_concurrent)
    # A chat model class that does not implement bind_tools gets the text protocol instead of failing.
    native = type(model).bind_tools is not BaseChatModel.bind_tools
    return BoundModel(name=req.route_name, route=route, model=model, model_label=route.model,
                      base_url=route.base_url, native_tools=native)
