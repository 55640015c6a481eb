"""One LLM call as the runtime makes it: limits, retries, usage, tool calls, JSON.

Every agent, judge and attribution call goes through :func:`call_llm`, so
retries are traced as ``error`` events, tokens come from the reply's usage and
latency from a clock around the call, and small local models' quirks (tool calls written as
text, chatty JSON) are handled in one place.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage

from descriptor.events import ErrorInfo
from mas.llm.cache import CachedReply, CacheUse, current_cache, endpoint_label, request_key
from mas.llm.jsonparse import parse_json_object
from mas.llm.limits_run import call_bound, current_budget
from mas.llm.meter import METER
from mas.llm.models import BoundModel, MalformedReplyError
from mas.llm.sanitize import clean_message, sane_usage
from mas.llm.tool_calls import ToolCallRequest, reply_parts
from mas.llm.tokens import count_tokens
from mas.logging import get_logger
from mas.tracing import call_config, current_tracer, utc_now_iso

log = get_logger(__name__)


class LLMCallError(RuntimeError):
    """An LLM call failed for good (retries exhausted or a non-retryable error)."""


@dataclass(kw_only=True, slots=True)
class LLMResult:
    """What one call produced and cost."""

    message: AIMessage
    text: str
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    parsed: dict[str, Any] | None = None
    """The reply's JSON object, when it had one."""
    token_in: int = 0
    token_out: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    usage_source: str = "provider"
    """``provider`` (usage_metadata), ``tokenizer`` (server /tokenize) or ``estimate`` (chars/4)."""
    start: str = ""
    end: str = ""
    model_label: str = ""
    route: str = ""
    """The route (``default``, ``judge``, ...) the call went to."""
    attempts: int = 1
    cache_hit: bool = False
    """The reply came from the response cache: no request was sent."""
    cost_usd_saved: float = 0.0
    """On a cache hit, the original call's price, not paid again (USD)."""


def _length_cut_reply(err: BaseException) -> AIMessage | None:
    """The partial reply inside openai's ``LengthFinishReasonError`` (structured output cut at
    ``max_tokens``), with the usage the provider reported; None for any other error."""
    import openai

    if not isinstance(err, openai.LengthFinishReasonError) or not err.completion.choices:
        return None
    completion = err.completion
    usage = completion.usage
    content = completion.choices[0].message.content or ""
    msg = AIMessage(content=content, response_metadata={"finish_reason": "length"})
    if usage is not None:
        msg.usage_metadata = {"input_tokens": usage.prompt_tokens or 0, "output_tokens": usage.completion_tokens or 0,
                              "total_tokens": usage.total_tokens or 0}
    return msg


def _retryable(err: BaseException) -> bool:
    import openai

    if isinstance(err, asyncio.TimeoutError | httpx.TimeoutException | httpx.TransportError):
        return True
    # A 200 whose body is no chat completion (bad or empty JSON, HTML from a proxy): as transient as a 502.
    if isinstance(err, MalformedReplyError | json.JSONDecodeError):
        return True
    if isinstance(err, openai.APITimeoutError | openai.APIConnectionError | openai.RateLimitError):
        return True
    if isinstance(err, openai.APIStatusError):
        return err.status_code in (408, 409, 429) or err.status_code >= 500
    return False


def prompt_too_long(err: BaseException) -> bool:
    """True when ``err`` (or the cause of an :class:`LLMCallError`) is a server refusing a prompt over its context.

    By type: OpenAI's ``context_length_exceeded`` and llama-server's
    ``exceed_context_size_error`` arrive as HTTP 400 (``openai.BadRequestError``);
    servers that give no code say so in the 400's message. Never retried (the
    same prompt fails again); callers that can shorten the prompt do.
    """
    import openai

    cause = err.__cause__ if isinstance(err, LLMCallError) and err.__cause__ is not None else err
    if not isinstance(cause, openai.BadRequestError):
        return False
    body = cause.body if isinstance(cause.body, dict) else {}
    inner = body.get("error") if isinstance(body.get("error"), dict) else body
    if cause.code == "context_length_exceeded" or inner.get("type") == "exceed_context_size_error":
        return True
    text = str(cause.message).lower()
    return "context length" in text or "context size" in text or "context window" in text


def _connection_failed(err: BaseException) -> bool:
    """True when the request never got an answer (refused, reset, timed out): what a dead server looks like."""
    import openai

    return isinstance(err, openai.APIConnectionError | httpx.TransportError)


async def _server_down(bound: BoundModel, err: BaseException, *, final: bool) -> str | None:
    """Why the ``embedded`` server behind ``bound`` is gone, or None when it is up (or ``err`` is no connection failure).

    Between retries only the process is checked (a ``/proc`` read): once it has
    exited, retrying cannot help, and the exit code and log tail say why far
    better than "Connection error". After the last retry ``/health`` is asked
    too, so a hung server is named as well.
    """
    if bound.server is None or not _connection_failed(err):
        return None
    from mas.serving.server import EmbeddedServerError, check_alive

    try:
        await asyncio.to_thread(check_alive, bound.server, health=final)
    except EmbeddedServerError as down:
        return str(down)
    return None


def backoff_s(attempt: int, rng: random.Random, base: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff with full jitter: uniform(0, min(cap, base * 2**attempt)) seconds."""
    return rng.uniform(0, min(cap, base * 2**attempt))


RETRY_AFTER_CAP_S = 60.0
"""The longest wait a ``Retry-After`` header can impose before the next attempt (s)."""


def retry_after_s(err: BaseException) -> float | None:
    """The wait the endpoint asked for (``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date),
    capped at :data:`RETRY_AFTER_CAP_S`; None when it asked for none.

    >>> import httpx, openai
    >>> r = httpx.Response(429, headers={"retry-after": "7"}, request=httpx.Request("POST", "http://x"))
    >>> retry_after_s(openai.RateLimitError("slow down", response=r, body=None))
    7.0
    """
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    wait: float | None = None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            wait = float(ms) / 1000.0
        elif (value := headers.get("retry-after")) is not None:
            try:
                wait = float(value)
            except ValueError:
                from email.utils import parsedate_to_datetime

                wait = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
    except (TypeError, ValueError, OverflowError):
        return None
    if wait is None or wait != wait:  # NaN
        return None
    return min(RETRY_AFTER_CAP_S, max(0.0, wait))


def actor_seed(run_seed: int, actor: str) -> int:
    """The seed sent with ``actor``'s calls in a run whose seed is ``run_seed`` (0 <= seed < 2**31).

    One seed for every call of a run made a debate of clones: two debaters of one role read the same prompt in
    round 0, and the server, given the same seed, wrote the same reply twice (and again in round 1). Each actor
    now draws its own, still a function of the run's seed only, so a run replays exactly and every run of a
    task (its own run seed) draws anew. The multiplier keeps run seeds that differ by small amounts (runs of one
    task: ``base * 10_007 + r``) from giving two actors of two runs the same seed.
    """
    return (run_seed * 1_000_003 + zlib.crc32(actor.encode())) % 2**31


async def call_llm(
    bound: BoundModel,
    messages: list[BaseMessage],
    *,
    contract: str,
    actor: str,
    step: int | None = None,
    tools: list[Any] | None = None,
    json_schema: dict[str, Any] | None = None,
    temperature: float | None = None,
    metadata: dict[str, Any] | None = None,
    max_tokens: int | None = None,
) -> LLMResult:
    """Call the model once (with retries) and return text, tool calls, parsed JSON and usage.

    ``contract`` names the prompt's output contract (it travels as invoke
    metadata, with ``metadata``); ``step`` is the trajectory step index this output will
    be. Retries on 429/5xx/timeouts are traced as ``error`` events by
    ``actor``; :class:`LLMCallError` when they are exhausted. On an
    ``embedded`` route whose server process has died (or stopped answering
    after the last retry), the ``error`` event and the raised
    :class:`mas.serving.server.EmbeddedServerError` name its exit code and log tail.

    A tool call naming a tool that is not in ``tools`` is still returned
    (native or text protocol): the caller answers it with a failed result.
    ``max_tokens`` caps this call's reply below the route's ``max_tokens``
    (tokens). A prompt the server refuses as too long raises
    :class:`LLMCallError` at once; :func:`prompt_too_long` recognises it.
    """
    runnable: Any = bound.model
    tool_kwargs: dict[str, Any] = {}
    tool_names = {(t.name if hasattr(t, "name") else str(t)) for t in tools or []}
    if tools and bound.native_tools:
        # Small local models never return native tool_calls; they get the text protocol only.
        runnable, tool_kwargs = bound.with_tools(tools)
    response_format = _response_format(bound, contract, json_schema) if json_schema is not None and not tools else None
    # Invoke kwargs reach the model as a binding's would (a binding merges its kwargs with these), without a
    # new binding per call: building one was ~0.1 ms of a call's harness.
    kwargs: dict[str, Any] = dict(tool_kwargs)
    if response_format is not None:
        kwargs["response_format"] = response_format
    if temperature is not None:
        kwargs["temperature"] = temperature
    if max_tokens is not None:
        kwargs.update(_max_tokens_kwargs(bound, max_tokens))
    run_seed = getattr(bound.model, "seed", None)
    if isinstance(run_seed, int):  # a model that takes a seed (ChatOpenAI, llama.cpp's server) gets one per actor
        kwargs["seed"] = actor_seed(run_seed, actor)

    tracer = current_tracer()
    meta = {"contract": contract, "mas_actor": actor, "mas_step": step, **(metadata or {})}
    budget = current_budget()
    # refused here when the run has used up a budget (limits.*), counting what the calls in flight may use
    reserved = None if budget is None else await budget.admit(tracer, call_bound(bound.route, messages, max_tokens))
    result: LLMResult | None = None
    ticket = METER.call_started()
    try:
        result = await _call(bound, runnable, kwargs, messages, tracer, meta, contract=contract, actor=actor,
                             tools=tools, tool_names=tool_names, temperature=temperature, max_tokens=max_tokens,
                             response_format=response_format)
        return result
    finally:
        used = 0 if result is None else result.token_in + result.token_out
        METER.call_finished(ticket, tracer.run_id, used)
        if budget is not None:
            budget.finish(used, 0.0 if result is None else result.cost_usd,
                          0.0 if result is None else result.cost_usd_saved, reserved or (0, 0.0))


async def _call(bound: BoundModel, runnable: Any, kwargs: dict[str, Any], messages: list[BaseMessage], tracer: Any,
                meta: dict[str, Any], *,
                contract: str, actor: str, tools: list[Any] | None, tool_names: set[str], temperature: float | None,
                max_tokens: int | None, response_format: dict[str, Any] | None) -> LLMResult:
    """One call, from the cache or the endpoint (with retries)."""
    rng: random.Random | None = None  # the retries' jitter, seeded per call; made on the first backoff only
    cache = current_cache()
    key = _cache_key(cache, bound, messages, tools or [], temperature, max_tokens, response_format, meta, kwargs)
    if key is not None and cache is not None and cache.reads:
        t0, start = time.perf_counter(), utc_now_iso()
        hit = cache.cache.get(key, max_age_days=cache.settings.expire_days)
        if hit is not None:
            return _from_cache(bound, hit, tools, tool_names, start=start, t0=t0)
    attempts, max_retries = 0, bound.route.max_retries
    while True:
        attempts += 1
        start = utc_now_iso()
        t0 = time.perf_counter()
        try:
            # rate_limit.max_concurrent is held by the model's transport, only while the request is at the endpoint.
            msg = await runnable.ainvoke(messages, config=call_config(meta, messages), **kwargs)
            break
        except Exception as err:
            cut = _length_cut_reply(err)
            if cut is not None:
                # A schema-constrained reply that hit max_tokens: the tokens were
                # spent, so it is a reply (cut short), parsed tolerantly by the caller.
                msg = cut
                break
            retry = _retryable(err) and attempts <= max_retries
            down = await _server_down(bound, err, final=not retry)
            cause = f"{type(err).__name__}: {err}"
            if down is not None:
                tracer.emit(actor, "error", ErrorInfo(
                    kind="embedded_server_down", contract=contract, attempt=attempts, error=down[:2000],
                    cause=cause[:500], will_retry=False,
                ), start=start, latency_ms=(time.perf_counter() - t0) * 1000)
                from mas.serving.server import EmbeddedServerError

                # Not an LLMCallError: callers that fall back on a failed call
                # (judges, roles) must not carry on against a dead server.
                raise EmbeddedServerError(f"{bound.name} route: {down}") from err
            asked = retry_after_s(err) if retry else None
            wait = asked
            if retry and asked is None:  # our own backoff, its jitter seeded on the call's first one
                rng = rng or random.Random(f"{tracer.run_id}|{contract}|{actor}|{meta['mas_step']}")
                wait = backoff_s(attempts - 1, rng)
            tracer.emit(actor, "error", ErrorInfo(
                kind="llm_call", contract=contract, attempt=attempts, error=cause[:500], will_retry=retry,
                retry_in_s=None if wait is None else round(wait, 3), retry_after=asked is not None or None,
            ), start=start, latency_ms=(time.perf_counter() - t0) * 1000)
            if not retry:
                raise LLMCallError(f"{bound.name} route ({bound.model_label}): {cause}") from err
            await asyncio.sleep(wait or 0.0)
    latency_ms = (time.perf_counter() - t0) * 1000  # t0 is the last attempt's: the one that replied
    end = utc_now_iso()
    msg = clean_message(msg)  # model output enters here: nothing it holds may fail the run when stored
    text, calls = reply_parts(msg, tools, tool_names)
    usage = getattr(msg, "usage_metadata", None)  # the reply's own: what a callback's on_llm_end saw too
    if usage and (usage.get("input_tokens") or usage.get("output_tokens")):
        (got_in, got_out), absurd = sane_usage(usage.get("input_tokens"), usage.get("output_tokens"))
        source = "provider"
        if absurd:  # what is not believed is counted here, as a reply without usage is
            source = "estimate"
            tracer.emit(actor, "error", ErrorInfo(
                kind="absurd_usage", contract=contract, attempt=attempts, will_retry=False,
                error=f"the endpoint reported usage {absurd}; that count was estimated locally instead"[:500],
            ), start=start)
        token_in = got_in if got_in is not None else (await count_tokens(
            bound, "\n".join(str(m.content) for m in messages)))[0]
        token_out = got_out if got_out is not None else (await count_tokens(bound, text))[0]
    else:
        prompt = "\n".join(str(m.content) for m in messages)
        token_in, source = await count_tokens(bound, prompt)
        token_out, _ = await count_tokens(bound, text)
    result = LLMResult(
        message=msg, text=text, tool_calls=calls,
        parsed=None if calls else parse_json_object(text),
        token_in=token_in, token_out=token_out,
        latency_ms=latency_ms,
        cost_usd=bound.route.cost_usd(token_in, token_out),
        usage_source=source, start=start, end=end, model_label=bound.model_label, route=bound.name,
        attempts=attempts,
    )
    if key is not None and cache is not None and cache.writes:
        cache.cache.put(key, provider=bound.provider, model=bound.model_label, reply=CachedReply(
            message=msg, token_in=token_in, token_out=token_out, usage_source=source, cost_usd=result.cost_usd,
            latency_ms=result.latency_ms))
    return result


def _response_format(bound: BoundModel, contract: str, json_schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` asking ``bound`` for JSON of ``json_schema`` (None where it is asked in the prompt)."""
    mode = bound.structured_output_mode()
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": contract.replace(".", "_"), "schema": json_schema}}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def _cache_key(cache: CacheUse | None, bound: BoundModel, messages: list[BaseMessage], tools: list[Any],
               temperature: float | None, max_tokens: int | None, response_format: dict[str, Any] | None,
               meta: dict[str, Any], kwargs: dict[str, Any]) -> str | None:
    """The response-cache key of this call, or None when no cache is in use or the call may not be cached."""
    if cache is None or not bound.cacheable:
        return None
    temperature = bound.route.temperature if temperature is None else temperature
    sent_seed = kwargs.get("seed", getattr(bound.model, "seed", None))
    if not cache.cacheable(temperature, sent_seed):
        return None
    return request_key(
        # A server this project started gets a new port each time: its model file, not its address, is its identity.
        provider=bound.provider, model=bound.model_label,
        endpoint="project-server" if bound.server is not None else endpoint_label(bound.base_url), messages=messages,
        tools=tools, temperature=temperature, max_tokens=bound.route.max_tokens if max_tokens is None else max_tokens,
        seed=sent_seed if cache.scope() is not None else None, response_format=response_format,
        # Not the step index: concurrent agents (a debate round) take steps in scheduling order, which hits
        # (answered without waiting) change; the actor and the messages already place the call.
        place={**{k: v for k, v in meta.items() if k != "mas_step"}, "run_seed": cache.scope()})


def _from_cache(bound: BoundModel, hit: CachedReply, tools: list[Any] | None, tool_names: set[str], *,
                start: str, t0: float) -> LLMResult:
    """The result of a call answered from the cache: the stored reply, its original usage, nothing paid (what it
    saves is the route's price of that usage: the stored price is what the cache file says, not a measurement)."""
    msg = hit.message
    text, calls = reply_parts(msg, tools, tool_names)
    return LLMResult(
        message=msg, text=text, tool_calls=calls, parsed=None if calls else parse_json_object(text),
        token_in=hit.token_in, token_out=hit.token_out, latency_ms=(time.perf_counter() - t0) * 1000,
        cost_usd=0.0, usage_source=hit.usage_source, start=start, end=utc_now_iso(), model_label=bound.model_label,
        route=bound.name, cache_hit=True, cost_usd_saved=bound.route.cost_usd(hit.token_in, hit.token_out),
    )


def _max_tokens_kwargs(bound: BoundModel, max_tokens: int) -> dict[str, Any]:
    """Invoke kwargs capping one reply at ``max_tokens`` (llama-server reads ``max_tokens`` from the body the
    route set, so the body field is overridden too)."""
    kwargs: dict[str, Any] = {"max_tokens": max_tokens}
    extra = getattr(bound.model, "extra_body", None)
    if isinstance(extra, dict) and "max_tokens" in extra:
        kwargs["extra_body"] = {**extra, "max_tokens": max_tokens}
    return kwargs


def llm_event_fields(result: LLMResult) -> dict[str, Any]:
    """Envelope fields of a trace event backed by this call."""
    return {
        "start": result.start,
        "end": result.end,
        "token_in": result.token_in,
        "token_out": result.token_out,
        "latency_ms": result.latency_ms,
        "cost_usd": result.cost_usd,
        "usage_source": result.usage_source,
        "model": result.model_label,
        "route": result.route or None,
        **({"cache_hit": True, "cost_usd_saved": result.cost_usd_saved} if result.cache_hit else {}),
    }
