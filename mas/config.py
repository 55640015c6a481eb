"""Experiment configuration: a TOML file loaded into pydantic models.

Every key is validated once, at load time, and an error names the file, the
dotted key and what was expected. CLI flags override values after loading via
:func:`apply_overrides`, so a run's metadata always records the effective
config.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator

from benchmark.dataset_spec import DatasetSpec, beside
from descriptor.errors import UserError
from descriptor.redact import register_secret_env, register_secret_value, url_credentials
from descriptor.registry import RegistryError, load_plugins
from mas.study_settings import CacheSettings, LimitSettings, SystemsSettings
from mas.study_settings import Strict as _Strict

BUILTIN_ROUTES = ("scripted", "embedded")


class ConfigError(UserError):
    """A configuration problem, phrased for the person who wrote the file."""


class RateLimit(_Strict):
    """Client-side limits for one endpoint."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    """Upper bound on request starts per minute; None means unlimited."""
    max_concurrent: int | None = Field(default=None, ge=1)
    """Upper bound on requests in flight at once; None means unlimited."""


class TablePrice(_Strict):
    """Where a route's prices come from when the config gives none (:mod:`mas.llm.prices`)."""

    table: str
    """The price table and its version, e.g. ``genai-prices 0.2.5``."""
    model: str | None
    """The table's ``provider:model`` the route matched; None: the table does not know the model (priced 0)."""


class ModelRoute(_Strict):
    """One chat model endpoint.

    ``provider`` picks the client: ``openai`` is any OpenAI-compatible HTTP
    endpoint (OpenAI, OpenRouter, vLLM, llama.cpp); ``embedded`` is the local
    model this project serves itself; ``langchain`` is any chat model
    LangChain's ``init_chat_model`` builds (``model = "anthropic:claude-..."``);
    ``scripted`` is the deterministic test double and must be asked for by name.
    """

    provider: str = "openai"
    """A registered provider (:data:`mas.llm.providers.PROVIDERS`): ``openai``, ``embedded``, ``langchain``,
    ``scripted``, or one a plugin adds; checked when the route's models are built."""
    model: str = ""
    """Model name sent to the endpoint (e.g. ``openai/gpt-4o-mini``)."""
    base_url: str | None = None
    """Endpoint root ending in ``/v1``; None means the provider default."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (default ``OPENROUTER_API_KEY`` for an OpenRouter URL,
    else ``OPENAI_API_KEY``)."""
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    """The key itself, for a ``config/experiment.toml`` kept out of git; the environment variable wins when set.
    A secret: never serialized (a run's recorded config has no key), redacted from every artifact and log."""
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    max_tokens: int = Field(default=512, ge=1)
    """Upper bound on generated tokens per call."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Request timeout (s); None: 120 for endpoints, 1800 for ``embedded`` (see :meth:`request_timeout_s`)."""
    max_retries: int = Field(default=4, ge=0)
    """Retries with exponential backoff and jitter on 429/5xx/timeouts."""
    price_input_per_1m: float | None = Field(default=None, ge=0)
    """USD per one million input tokens, for ``cost_usd``. None with ``price_output_per_1m`` None too: a sweep
    takes both from a maintained price table (:mod:`mas.llm.prices`; local models cost 0); the config's win."""
    price_output_per_1m: float | None = Field(default=None, ge=0)
    """USD per one million output tokens, for ``cost_usd`` (None: see ``price_input_per_1m``)."""
    price_table: TablePrice | None = None
    """Set by the sweep when the prices come from the price table (:mod:`mas.llm.prices`), not the config."""
    context_window: int = Field(default=8192, ge=256)
    """Tokens the model accepts; long prompts are fitted to this."""
    scripted_latency_ms: float = Field(default=0.0, ge=0)
    """Scripted provider only: simulated latency per call (ms)."""
    rate_limit: RateLimit = Field(default_factory=RateLimit)

    def cost_usd(self, token_in: int, token_out: int) -> float:
        """Price of one call in USD (a price not set counts 0)."""
        return (token_in * (self.price_input_per_1m or 0.0) + token_out * (self.price_output_per_1m or 0.0)) / 1e6

    def request_timeout_s(self) -> float:
        """The request timeout in seconds.

        The local server queues requests beyond its slots and the client's
        timeout runs while they wait (a queued ECHO panel call waited past
        120 s on 2 cores), so ``embedded`` defaults to 30 minutes; a dead
        server is detected by its process instead (:mod:`mas.llm.call`).
        """
        if self.timeout_s is not None:
            return self.timeout_s
        return 1800.0 if self.provider == "embedded" else 120.0


class EmbeddedSettings(_Strict):
    """The local llama.cpp server behind the ``embedded`` route."""

    model: Literal["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] = "qwen2.5-coder-0.5b"
    cache_dir: str | None = None
    """Where the assembled GGUF and the server build live; None: the user cache dir."""
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    """0 picks a free port."""
    ctx_size: int = Field(default=16384, ge=512)
    """Total KV-cache tokens, shared by the parallel slots."""
    parallel: int = Field(default=4, ge=1)
    """Server slots decoding concurrently (continuous batching)."""
    threads: int = Field(default=0, ge=0)
    """CPU threads; 0 means the number of cores."""
    startup_timeout_s: float = Field(default=180.0, gt=0)


class MasSettings(_Strict):
    """Settings of the multi-agent topologies."""

    agents: int = Field(default=3, ge=1)
    """Debaters in ``debate``, workers in ``orchestrator`` and ``supervisor``."""
    max_rounds: int = Field(default=3, ge=1)
    """Upper bound on debate rounds after the first answers (and on representative-exchange rounds)."""
    minimum_discussion_rounds: int = Field(default=1, ge=0)
    """Discussion rounds the controller may not stop before: debate rounds and representative-exchange rounds (both
    discussions among agents that read each other's answers); the supervisor and the orchestrator are not gated."""
    rounds: int = Field(default=1, ge=1)
    """Outer plan-work-critique cycles of ``orchestrator``."""
    max_tool_iterations: int = Field(default=6, ge=1)
    """Tool calls an agent may make in one turn before it must answer."""
    builtin_tools: bool = True
    """Whether agents on a benchmark without an environment get the calculator and Python. ``false``: every answer
    is one call, schema-constrained on routes that constrain JSON (the embedded model), so shorter and cheaper;
    an environment's tools (WorkBench, BrowseComp) are never switched off."""
    reasoning_max_chars: int = Field(default=800, ge=40)
    """Upper bound on an answer's ``reasoning`` (characters), enforced by the JSON schema on routes that constrain
    it (the embedded model): the concise-answer lever, about 4 characters a token."""
    termination_consensus_mode: Literal["llm_judge", "lexical"] = "llm_judge"
    confidence_scale: Literal["clip", "percent"] = "clip"
    """How an answer's ``confidence`` is read (:mod:`mas.llm.confidence`): ``clip``, the harness README's rule
    (a float clipped into [0, 1]; missing or unparsable: 0.5); ``percent`` also reads 1-100 as a percentage and
    words such as ``high`` (``"1.5"`` is then 0.015)."""
    final_vote_mode: Literal["llm_judge", "lexical"] = "llm_judge"
    """How a topology whose last stage chooses among candidates (debate, representative_exchange) chooses."""
    groups: int = Field(default=3, ge=2)
    """Groups in ``representative_exchange``."""
    agents_per_group: int = Field(default=2, ge=1)
    """Members of each group in ``representative_exchange``."""
    election_mode: Literal["llm_judge", "lexical"] = "llm_judge"
    """How a ``representative_exchange`` group elects its representative: the group's judge, or a lexical vote."""
    persona_mode: Literal["static", "generated"] = "static"
    """``static``: ``personas`` round-robin (none by default); ``generated``: one model call per run specialises
    every agent within its role (see :mod:`mas.topologies.personas`)."""
    personas: list[str] = Field(default_factory=list)
    """Static personas, assigned round-robin to the agents of each parallel stage inside their role."""

    @model_validator(mode="after")
    def _minimum_within_max(self) -> MasSettings:
        # A minimum above the cap would make debate stop at max_rounds with the
        # minimum silently unmet; say so at load time instead.
        if self.minimum_discussion_rounds > self.max_rounds:
            raise ValueError(
                f"mas.minimum_discussion_rounds ({self.minimum_discussion_rounds}) must not exceed "
                f"mas.max_rounds ({self.max_rounds})"
            )
        return self


class StorageSettings(_Strict):
    """What a run keeps on disk."""

    checkpoints: Literal["failed", "all", "none"] = "failed"
    """LangGraph checkpoints exist for rollback: ``failed`` keeps them for runs that did not succeed (the ones a
    rollback can repair), ``all`` for every run, ``none`` never writes them (in-memory checkpoints only)."""


class SandboxSettings(_Strict):
    """Limits and isolation of the Python-execution tool and of code evaluation (see :mod:`benchmark.sandbox`)."""

    timeout_s: float = Field(default=5.0, gt=0)
    memory_mb: int = Field(default=512, ge=32)
    isolation: Literal["namespaces", "unsafe-no-namespaces"] = "namespaces"
    """``namespaces``: model-written code runs in its own user, PID, network and mount namespaces, and a sweep
    refuses to start where they are unavailable. ``unsafe-no-namespaces``: only resource limits and an audit
    hook, which is no security boundary (the code can read your files); also the default of the code
    benchmarks' ``isolation`` option."""


class InjectSettings(_Strict):
    """Scripted-model error injection (ground truth for attribution tests)."""

    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Fraction of runs, chosen with the seed, that get one wrong step."""
    agent: str | None = None
    """Inject at this agent only (exact name); None: any agent."""
    step: int | None = Field(default=None, ge=0)
    """Inject at this trajectory step index; None: a seeded position."""
    position: Literal["left", "mid", "right", "uniform"] | None = None
    """Rollback scenario: place the error in the first (``left``), middle or last part of the run's steps, dense
    there, or ``uniform`` over them (see :mod:`mas.sweep.injection`); None: ``step``, else one of the first four."""

    @model_validator(mode="after")
    def _one_placement(self) -> InjectSettings:
        if self.step is not None and self.position is not None:
            raise ValueError(f"inject.step ({self.step}) and inject.position ({self.position!r}) both place the "
                             "error; set one of them")
        return self


class TracingSettings(_Strict):
    """Where traces go besides the run's JSONL, and what they may hold.

    Span ids are always in the JSONL; spans are exported over OTLP/HTTP
    when ``otlp_endpoint`` is set or the standard variable
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    is (see :mod:`mas.otel`); headers (e.g. a backend's key) come from
    ``OTEL_EXPORTER_OTLP_HEADERS``, never from this file.
    """

    otlp_endpoint: str | None = None
    """OTLP/HTTP base URL (spans go to ``<url>/v1/traces``), e.g. ``http://127.0.0.1:6006``; None: the
    environment decides."""
    export: bool = True
    """False: never export, whatever the environment says."""
    record_inputs: bool = False
    """Record the model's input messages in the trace (``payload.input_messages``) and message contents in
    exported spans (off: spans carry names, timing, tokens and decisions, no text)."""

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, got {v!r}")
        return v


class ExperimentConfig(_Strict):
    """Everything a run needs besides the benchmark task."""

    seed: int = 0
    output_root: str = "artifacts"
    concurrency: int = Field(default=4, ge=1)
    """Runs executing at once."""
    models: dict[str, ModelRoute] = Field(default_factory=lambda: {"default": ModelRoute(provider="embedded")})
    """Named routes; ``default`` is required, ``judge`` is optional."""
    roles: dict[str, str] = Field(default_factory=dict)
    """Role name -> route name (e.g. ``critic = "openrouter"``)."""
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    mas: MasSettings = Field(default_factory=MasSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    systems: SystemsSettings = Field(default_factory=SystemsSettings)
    sweep_models: list[str] = Field(default_factory=list)
    """A model matrix (``--models``): every system runs on each of these routes; ``models`` is the routes' table,
    so the list has its own key."""
    inject: InjectSettings = Field(default_factory=InjectSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    benchmarks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-benchmark options, passed to the adapter (e.g. ``data_path``)."""
    datasets: dict[str, DatasetSpec] = Field(default_factory=dict)
    """Plain datasets as benchmarks, by name (``--benchmark NAME``; :mod:`benchmark.dataset`); a relative ``path``
    is relative to the config file's directory."""
    plugins: list[str] = Field(default_factory=list)
    """Python modules to import when the config is loaded, as ``--plugin MODULE`` does: code that is not installed
    (``my_benchmarks``, a file next to the config) registering benchmarks, systems, methods or scorers with the
    registries' decorators. Dotted module names, found on ``sys.path`` or in the current directory; a sweep's
    worker processes import them too."""

    @field_validator("plugins")
    @classmethod
    def _import_plugins(cls, modules: list[str]) -> list[str]:
        for name in modules:
            if not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"expected a dotted Python module name, got {name!r}")
        try:
            load_plugins(modules)
        except RegistryError as err:
            raise ValueError(str(err)) from None
        return modules

    @field_validator("datasets")
    @classmethod
    def _dataset_names(cls, datasets: dict[str, DatasetSpec]) -> dict[str, DatasetSpec]:
        for name in datasets:  # a benchmark's name is a directory name, and never a unit's system@model
            if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name) is None:
                raise ValueError(f"dataset name {name!r}: expected 1-100 letters, digits, '.', '_' or '-'")
        return datasets

    @field_validator("models")
    @classmethod
    def _has_default(cls, routes: dict[str, ModelRoute]) -> dict[str, ModelRoute]:
        if "default" not in routes:
            raise ValueError("a [models.default] route is required")
        return routes

    @model_validator(mode="after")
    def _register_secrets(self) -> ExperimentConfig:
        register_route_secrets(self)
        return self

    @model_validator(mode="after")
    def _roles_exist(self) -> ExperimentConfig:
        for role, route in self.roles.items():
            if route not in self.models and route not in BUILTIN_ROUTES:
                raise ValueError(f"roles.{role} names route {route!r}, which is not under [models]")
        return self

    def route(self, name: str) -> ModelRoute:
        """The route called ``name``: a configured one, or a built-in (scripted, embedded)."""
        if name in self.models:
            return self.models[name]
        if name in BUILTIN_ROUTES:
            return ModelRoute(provider=name, model=name)
        from descriptor.suggest import unknown_name

        raise ConfigError(unknown_name("model route", name, sorted(set(self.models) | set(BUILTIN_ROUTES))))

    def route_for_role(self, role: str) -> ModelRoute:
        """The route an agent in ``role`` uses: ``roles.<role>``, then ``models.<role>``, then default."""
        return self.route(self.route_name_for_role(role))

    def route_name_for_role(self, role: str) -> str:
        """Name of the route :meth:`route_for_role` resolves ``role`` to."""
        if role in self.roles:
            return self.roles[role]
        return role if role in self.models else "default"

    def used_routes(self, roles: Iterable[str]) -> dict[str, ModelRoute]:
        """Routes a run may call: default, and the route of each of ``roles`` (``roles.<role>`` or ``[models.<role>]``).

        ``roles`` are the roles the systems of the run declare
        (:func:`mas.systems.agent_roles`). Keyed by route name. Routes that no
        role resolves to (e.g. an ``[models.openrouter]`` kept for ``--model
        openrouter``) are left out, so their keys are not demanded.
        """
        names = ["default", *(self.route_name_for_role(r) for r in roles), *self.roles.values()]
        return {n: self.route(n) for n in dict.fromkeys(names)}

    def redacted(self) -> dict[str, Any]:
        """The config as plain data, safe for artifacts (it never holds keys, only env names)."""
        return self.model_dump(mode="json")


def _format_validation_error(path: str, err: ValidationError) -> str:
    """One self-contained line per problem: ``<file>: <dotted key>: <what was expected> (got <value>)``; a key
    the config does not have says which keys it does have there, the close ones first."""
    from descriptor.redact import looks_like_key, named_like_secret
    from descriptor.suggest import did_you_mean, keys_at

    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        got = e.get("input")
        # a key under a misspelt name (apikey, api-key) is still a key: its value is never echoed
        secret = any(named_like_secret(str(p)) for p in e["loc"]) or (isinstance(got, str) and looks_like_key(got))
        shown = "" if isinstance(got, dict) else " (value not shown: it may be a secret)" if secret else (
            f" (got {got!r:.80})")
        msg = e["msg"]
        if e["type"] == "extra_forbidden" and (known := keys_at(ExperimentConfig, e["loc"][:-1])):
            msg = f"unknown key{did_you_mean(str(e['loc'][-1]), known)}; keys here: {', '.join(known)}"
        lines.append(f"{path}: {key}: {msg}{shown}")
    return "\n".join(lines)


def parse_config(data: dict[str, Any], source: str = "<config>") -> ExperimentConfig:
    """Validate a config mapping; errors name ``source`` and the dotted key."""
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(source, err)) from None


def load_config(path: str | Path | None) -> ExperimentConfig:
    """Load a TOML experiment config; ``None`` gives the built-in defaults.

    >>> load_config(None).models["default"].provider
    'embedded'
    """
    if path is None:
        return ExperimentConfig()
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: is a directory; expected a TOML config file")
    if not p.is_file():
        raise ConfigError(f"{p}: config file not found")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{p}: malformed TOML: {err}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{p}: malformed TOML: arrays or inline tables nested too deeply") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: not UTF-8 text (byte {err.start}: {err.reason}); a config is a UTF-8 TOML file") from None
    except OSError as err:
        raise ConfigError(f"{p}: cannot be read ({err.strerror})") from None
    for table in (data.get("datasets") or {}).values() if isinstance(data.get("datasets"), dict) else ():
        path = table.get("path") if isinstance(table, dict) else None
        if isinstance(path, str):
            table["path"] = beside(path, p.parent)
    return parse_config(data, str(p))


def register_route_secrets(cfg: ExperimentConfig) -> None:
    """Make every route's key variable a secret for :mod:`descriptor.redact`, whatever it is called.

    Runs whenever a config is validated (and again where a pickled config
    arrives in another process, see :class:`mas.llm.models.ModelSet`), so no
    artifact, log or checkpoint of this process can hold the key.
    """
    register_secret_env(r.api_key_env for r in cfg.models.values())
    for r in cfg.models.values():
        register_secret_value(r.api_key.get_secret_value() if r.api_key is not None else None)
        for value in url_credentials(r.base_url or ""):  # a password in the URL, a key in its query string
            register_secret_value(value)


_SUPPLIED_KEYS: contextvars.ContextVar[dict[tuple[str, str | None, str], Any]] = contextvars.ContextVar(
    "mas_supplied_keys", default={})


@contextlib.contextmanager
def supplied_keys(cfg: ExperimentConfig) -> Iterator[None]:
    """Within the block, :func:`with_supplied_keys` gives a stored config the keys ``cfg`` (the config this
    invocation read) holds for the same routes: a run resumed from its record (``run --rollback``) gets a config
    without keys, as every stored config is."""
    keys = {(r.provider, r.base_url, r.model): r.api_key for r in cfg.models.values() if r.api_key is not None}
    token = _SUPPLIED_KEYS.set(keys)
    try:
        yield
    finally:
        _SUPPLIED_KEYS.reset(token)


def with_supplied_keys(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg`` with the keys of :func:`supplied_keys` on its routes that have none (same provider, URL, model)."""
    keys = _SUPPLIED_KEYS.get()
    if not keys:
        return cfg
    models = {name: r.model_copy(update={"api_key": keys[(r.provider, r.base_url, r.model)]})
              if r.api_key is None and (r.provider, r.base_url, r.model) in keys else r for name, r in cfg.models.items()}
    return cfg.model_copy(update={"models": models})


def require_api_key(route: ModelRoute, route_name: str = "default") -> str | None:
    """The route's API key: its environment variable when set, else the config file's ``api_key``; raise if it
    is needed and absent.

    A route naming ``api_key_env`` needs that variable set. Hosted OpenAI-compatible routes need a key even
    without one (``OPENAI_API_KEY``, ``OPENROUTER_API_KEY``); a route with a ``base_url`` on the loopback
    interface (a local llama.cpp or vLLM) may run without one.
    """
    env = route.api_key_env
    register_secret_env([env])
    if env is None:
        local = route.base_url is not None and any(
            h in route.base_url for h in ("127.0.0.1", "localhost", "[::1]")
        )
        # other providers need a key only when they name one
        if (local or route.provider != "openai") and route.api_key is None:
            return None
        env = "OPENROUTER_API_KEY" if route.base_url and "openrouter" in route.base_url else "OPENAI_API_KEY"
    key = os.environ.get(env) or (route.api_key.get_secret_value() if route.api_key is not None else None)
    if not key:
        raise ConfigError(
            f"models.{route_name}: the route {route.model!r} needs an API key in the environment "
            f"variable {env}, which is not set (or as models.{route_name}.api_key in the config file)"
        )
    return key
