"""The LLM call layer: confidence clipping, tool-call protocols, retries traced as errors."""

import pytest
from langchain_core.messages import HumanMessage

from mas.agent import parse_answer
from mas.config import ExperimentConfig, ModelRoute
from mas.jsonparse import parse_json_object
from mas.llm import LLMCallError, TransientModelError, _text_tool_calls, backoff_s, call_llm, clip_confidence
from mas.models import make_chat_model
from mas.scripted import RESPONDERS, responder
from mas.tracing import ListCollector, Tracer, use_tracer


@pytest.mark.parametrize(("raw", "want"), [
    (0.7, 0.7), ("0.25", 0.25), (1.5, 1.0), (-3, 0.0), (None, 0.5), ("high", 0.5), (float("nan"), 0.5),
])
def test_confidence_is_clipped(raw, want):
    assert clip_confidence(raw) == want


def test_answer_parse_and_fallback():
    a = parse_answer(parse_json_object('```json\n{"reasoning": "r", "answer_artifact": "42", "confidence": 9}\n```'), "")
    assert (a.answer_artifact, a.confidence, a.parse) == ("42", 1.0, "json")
    b = parse_answer(None, "  the answer is 7 ")
    assert (b.answer_artifact, b.confidence, b.parse) == ("the answer is 7", 0.5, "fallback")


def test_text_tool_protocol_parsing():
    text = 'Let me compute.\n```json\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n```'
    calls = _text_tool_calls(text, {"calculator", "python"})
    assert len(calls) == 1 and calls[0].arguments == {"expression": "2+2"} and calls[0].protocol == "text"
    tagged = '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
    assert _text_tool_calls(tagged, {"calculator", "python"})[0].name == "python"
    assert _text_tool_calls('{"name": "rm", "arguments": {}}', {"calculator"}) == []


def test_backoff_is_bounded_and_grows():
    import random

    rng = random.Random(0)
    assert all(0 <= backoff_s(a, rng) <= min(30, 0.5 * 2**a) for a in range(10))


@pytest.fixture
def flaky_contract():
    state = {"n": 0}

    @responder("test.flaky")
    def _flaky(ctx):
        state["n"] += 1
        if state["n"] <= 2:
            raise TransientModelError("503 from upstream")
        return '{"ok": true}'

    yield state
    RESPONDERS.pop("test.flaky")


async def test_retries_are_traced_and_succeed(flaky_contract, monkeypatch):
    monkeypatch.setattr("mas.llm.backoff_s", lambda attempt, rng: 0.0)
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted", max_retries=3)})
    bound = make_chat_model(cfg)
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        res = await call_llm(bound, [HumanMessage("hi")], contract="test.flaky", actor="a")
    assert res.parsed == {"ok": True} and res.attempts == 3
    errors = [e for e in sink.events if e.event_type == "error"]
    assert [e.payload["will_retry"] for e in errors] == [True, True]


async def test_retries_exhausted_raise(flaky_contract, monkeypatch):
    monkeypatch.setattr("mas.llm.backoff_s", lambda attempt, rng: 0.0)
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted", max_retries=1)})
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])), pytest.raises(LLMCallError, match="503"):
        await call_llm(make_chat_model(cfg), [HumanMessage("hi")], contract="test.flaky", actor="a")
    assert [e.payload["will_retry"] for e in sink.events] == [True, False]
