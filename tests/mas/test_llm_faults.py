"""A real HTTP endpoint on 127.0.0.1 misbehaving: malformed 200 replies are retried like a 5xx, ``Retry-After`` is
honoured (capped), every retry is an ``error`` event, and a call that fails for good raises (issue 18)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from mas.config import ExperimentConfig, ModelRoute
from mas.llm.call import RETRY_AFTER_CAP_S, LLMCallError, call_llm, retry_after_s
from mas.llm.models import make_chat_model
from mas.tracing import ListCollector, Tracer, use_tracer
from tests.fake_endpoint import FakeEndpoint, Reply, answer

MALFORMED: dict[str, Reply] = {
    "bad-json": (200, {"content-type": "application/json"}, b'{"id": "x", "choices": [ {'),
    "empty-body": (200, {"content-type": "application/json"}, b""),
    "html": (200, {"content-type": "text/html"}, b"<html><body>502 Bad Gateway</body></html>"),
    "error-object": (200, {"content-type": "application/json"}, b'{"error": {"message": "upstream overloaded"}}'),
    "no-choices": (200, {"content-type": "application/json"},
                   b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}'),
}


@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setattr("mas.llm.call.backoff_s", lambda attempt, rng: 0.0)


async def _call(server: FakeEndpoint, max_retries: int = 3):
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="openai", model="fake", base_url=server.base_url,
                                                         max_retries=max_retries)})
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        try:
            return await call_llm(make_chat_model(cfg), [HumanMessage("hi")], contract="agent.turn", actor="a"), sink
        except LLMCallError as err:
            return err, sink


@pytest.mark.parametrize("kind", sorted(MALFORMED))
async def test_malformed_200_replies_are_retried_like_5xx(endpoint, no_backoff, kind):
    server = endpoint(lambda n, req: MALFORMED[kind] if n <= 2 else answer("7", n))
    res, sink = await _call(server)
    assert not isinstance(res, Exception), res
    assert res.attempts == 3 and res.parsed["answer_artifact"] == "7"
    errors = [e.payload for e in sink.events if e.event_type == "error"]
    assert [(e.kind, e.will_retry) for e in errors] == [("llm_call", True), ("llm_call", True)]


async def test_a_call_failing_for_good_raises_after_its_retries(endpoint, no_backoff):
    server = endpoint(lambda n, req: (500, {"content-type": "application/json"}, b'{"error": {"message": "down"}}'))
    res, sink = await _call(server, max_retries=2)
    assert isinstance(res, LLMCallError) and "500" in str(res)
    assert [e.payload.will_retry for e in sink.events if e.event_type == "error"] == [True, True, False]
    assert len(server.requests) == 3


async def test_retry_after_is_honoured(endpoint):
    server = endpoint(lambda n, req: (429, {"content-type": "application/json", "retry-after-ms": "400"},
                                      b'{"error": {"message": "slow down"}}') if n == 1 else answer("7", n))
    res, sink = await _call(server)
    assert not isinstance(res, Exception), res
    [err] = [e.payload for e in sink.events if e.event_type == "error"]
    assert err.retry_in_s == 0.4 and err.retry_after
    assert server.times[1] - server.times[0] >= 0.35


async def test_a_structured_reply_cut_at_max_tokens_is_a_reply_with_its_usage(endpoint):
    """openai's parser raises LengthFinishReasonError on a schema-bound reply that hit max_tokens; the call
    returns the partial text (the caller parses tolerantly) and counts the tokens the provider billed."""
    import json

    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": '{"agent": "coder", "step": 3, "reas'}}],
            "usage": {"prompt_tokens": 400, "completion_tokens": 256, "total_tokens": 656}}
    server = endpoint(lambda n, req: (200, {"content-type": "application/json"}, json.dumps(body).encode()))
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="openai", model="fake", base_url=server.base_url)})
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        res = await call_llm(make_chat_model(cfg), [HumanMessage("hi")], contract="attribution.x.y", actor="a",
                             json_schema={"type": "object", "properties": {"step": {"type": "integer"}}})
    assert res.text.startswith('{"agent": "coder"') and res.parsed is None
    assert (res.token_in, res.token_out, res.usage_source) == (400, 256, "provider")
    assert len(server.requests) == 1 and "response_format" in server.requests[0]
    assert not [e for e in sink.events if e.event_type == "error"]


def test_a_route_serves_a_second_event_loop_in_the_same_process(endpoint):
    """``run --rollback`` runs the sweep and then the rollbacks under two ``asyncio.run``s: the second must not
    reuse a kept-alive connection of the first, closed loop (it failed every rollback call on the embedded model
    with "Event loop is closed")."""
    import asyncio

    server = endpoint(lambda n, req: answer(str(n), n), keep_alive=True)
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="openai", model="fake",
                                                         base_url=server.base_url, max_retries=0)})

    async def one() -> str:
        with use_tracer(Tracer("t", [ListCollector()])):
            res = await call_llm(make_chat_model(cfg), [HumanMessage("hi")], contract="agent.turn", actor="a")
        return res.parsed["answer_artifact"]

    assert [asyncio.run(one()) for _ in range(3)] == ["1", "2", "3"]


def test_retry_after_forms_and_cap():
    import httpx
    import openai

    def err(headers):
        r = httpx.Response(429, headers=headers, request=httpx.Request("POST", "http://x"))
        return openai.RateLimitError("slow down", response=r, body=None)

    assert retry_after_s(err({"retry-after": "2.5"})) == 2.5
    assert retry_after_s(err({"retry-after": "86400"})) == RETRY_AFTER_CAP_S
    assert retry_after_s(err({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # in the past
    assert retry_after_s(err({"retry-after": "soon"})) is None
    assert retry_after_s(err({})) is None
    assert retry_after_s(RuntimeError("no response")) is None


async def test_each_actor_of_a_run_sends_its_own_seed(endpoint):
    """Two debaters of one role read the same prompt in round 0: with one seed per run the server wrote the same
    reply for both (a debate of clones). Each actor's seed is a function of the run's seed and its name only."""
    server = endpoint(lambda n, req: answer("7", n))
    seeds: dict[tuple[int, str], int] = {}
    for run_seed in (5, 6):
        cfg = ExperimentConfig(seed=run_seed, models={"default": ModelRoute(provider="openai", model="fake",
                                                                            base_url=server.base_url)})
        model = make_chat_model(cfg)
        with use_tracer(Tracer("t", [])):
            for actor in ("debater_0", "debater_1", "debater_0"):
                await call_llm(model, [HumanMessage("same prompt")], contract="agent.turn", actor=actor)
                seed = server.requests[-1]["seed"]
                assert isinstance(seed, int) and 0 <= seed < 2**31
                assert seeds.setdefault((run_seed, actor), seed) == seed  # the same actor: the same seed
    assert len(set(seeds.values())) == 4  # two actors x two runs: four draws
