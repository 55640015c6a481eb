"""The LLM call layer: reading confidences, tool-call protocols, retries traced as errors."""

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import json

from mas.topologies.agent import AgentSpec, RunContext, agent_turn, opening_messages, parse_answer
from mas.config import ExperimentConfig, ModelRoute
from mas.llm.jsonparse import parse_json_object
from mas.llm.call import LLMCallError, backoff_s, call_llm
from mas.llm.tool_calls import text_tool_calls
from mas.llm.confidence import parse_confidence
from mas.llm.models import ModelSet, make_chat_model
from tests.model_errors import server_error
from mas.tracing import ListCollector, Tracer, use_tracer


@pytest.mark.parametrize(("raw", "want"), [
    (0.7, 0.7), ("0.25", 0.25), (".7", 0.7), ("7", 0.07), (70, 0.7), ("70%", 0.7), ("150%", 1.0), (250, 1.0),
    (-3, 0.0), ("high", 0.8), ("Very low", 0.1), ("confidence: 0.8", 0.8), (None, 0.5), (float("nan"), 0.5),
    ("nan", 0.5), (True, 0.5), ("unsure", 0.5),
])
def test_one_confidence_rule_reads_numbers_percentages_and_words(raw, want):
    assert parse_confidence(raw, 0.5) == pytest.approx(want)


def test_a_missing_confidence_is_the_callers_default():
    assert parse_confidence(None, None) is None and parse_confidence("", 0.0) == 0.0


def test_confidence_doctests_hold():
    import doctest

    import mas.llm.confidence

    result = doctest.testmod(mas.llm.confidence)
    assert result.attempted and not result.failed


def test_answer_parse_and_fallback():
    a = parse_answer(parse_json_object('```json\n{"reasoning": "r", "answer_artifact": "42", "confidence": 9}\n```'), "")
    assert (a.answer_artifact, a.confidence, a.parse) == ("42", 1.0, "json")  # 9 clipped (the harness README's rule)
    b = parse_answer(None, "  the answer is 7 ")
    assert (b.answer_artifact, b.confidence, b.parse) == ("the answer is 7", 0.5, "fallback")


def test_text_tool_protocol_parsing():
    text = 'Let me compute.\n```json\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n```'
    calls = text_tool_calls(text, {"calculator", "python"})
    assert len(calls) == 1 and calls[0].arguments == {"expression": "2+2"} and calls[0].protocol == "text"
    tagged = '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
    assert text_tool_calls(tagged, {"calculator", "python"})[0].name == "python"
    # A call of an unknown tool is still a call (it gets a failed result); JSON without arguments is no call.
    unknown = text_tool_calls('{"name": "rm", "arguments": {"path": "/"}}', {"calculator"})
    assert [(c.name, c.arguments) for c in unknown] == [("rm", {"path": "/"})]
    assert text_tool_calls('{"name": "Ann", "answer_artifact": "3"}', {"calculator"}) == []


def test_backoff_is_bounded_and_grows():
    import random

    rng = random.Random(0)
    assert all(0 <= backoff_s(a, rng) <= min(30, 0.5 * 2**a) for a in range(10))


@pytest.fixture
def flaky_contract():
    """Provider args scripting ``test.flaky``: two 503s, then a reply."""
    state = {"n": 0}

    def flaky(ctx):
        state["n"] += 1
        if state["n"] <= 2:
            raise server_error("503 from upstream")
        return '{"ok": true}'

    return {"responders": {"test.flaky": flaky}}


async def test_retries_are_traced_and_succeed(flaky_contract, monkeypatch):
    monkeypatch.setattr("mas.llm.call.backoff_s", lambda attempt, rng: 0.0)
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted", max_retries=3)})
    bound = make_chat_model(cfg, provider_args=flaky_contract)
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        res = await call_llm(bound, [HumanMessage("hi")], contract="test.flaky", actor="a")
    assert res.parsed == {"ok": True} and res.attempts == 3
    errors = [e for e in sink.events if e.event_type == "error"]
    assert [e.payload.will_retry for e in errors] == [True, True]


async def test_retries_exhausted_raise(flaky_contract, monkeypatch):
    monkeypatch.setattr("mas.llm.call.backoff_s", lambda attempt, rng: 0.0)
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted", max_retries=1)})
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])), pytest.raises(LLMCallError, match="503"):
        await call_llm(make_chat_model(cfg, provider_args=flaky_contract), [HumanMessage("hi")], contract="test.flaky",
                       actor="a")
    assert [e.payload.will_retry for e in sink.events] == [True, False]


def _multiply_then_calculator(protocol):
    """An ``agent.turn`` responder that first calls a tool that does not exist, then recovers."""

    def call(name, args):
        if protocol == "text":
            return AIMessage(content="```json\n" + json.dumps({"name": name, "arguments": args}) + "\n```")
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{name}"}])

    def respond(ctx):
        seen = ctx.text()
        if "unknown tool" not in seen:
            return call("multiply", {"a": 6, "b": 7})
        if "42" not in seen.split("unknown tool", 1)[1]:
            return call("calculator", {"expression": "6 * 7"})
        return json.dumps({"reasoning": "6 * 7 by the calculator", "answer_artifact": "42", "confidence": 0.9})

    return respond


async def _solver_turn(question: str, turn, **cfg_fields: object) -> tuple[object, ListCollector]:
    """One scripted solver turn answered by ``turn`` (an ``agent.turn`` responder); its answer and events."""
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted")}, **cfg_fields)
    scripts = {"scripted": {"responders": {"agent.turn": turn}}}
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=0, provider_args=scripts), question=question)
    agent = AgentSpec(name="solver", role="solver")
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        turn = await agent_turn(rt, agent, opening_messages(rt, agent))
    return turn.answer, sink


@pytest.mark.parametrize("protocol", ["text", "native"])
async def test_unknown_tool_is_a_failed_call_and_the_agent_continues(protocol, monkeypatch):
    answer, sink = await _solver_turn("What is 6 times 7?", _multiply_then_calculator(protocol))
    assert answer.answer_artifact == "42"
    kinds = [(e.event_type, getattr(e.payload, "tool", None), getattr(e.payload, "ok", None)) for e in sink.events]
    assert kinds == [("tool_call", "multiply", None), ("tool_result", "multiply", False),
                     ("tool_call", "calculator", None), ("tool_result", "calculator", True), ("act", None, None)]
    call, failed = sink.events[0], sink.events[1]
    assert call.payload.tool_protocol == protocol and call.payload.arguments == {"a": 6, "b": 7}
    assert "unknown tool 'multiply'; available: calculator, python" in failed.payload.output
    assert failed.payload.tool_call_id == call.payload.tool_call_id


async def test_unknown_tool_calls_count_against_max_tool_iterations(monkeypatch):
    answer, sink = await _solver_turn("q", lambda ctx: (
        json.dumps({"answer_artifact": "gave up", "confidence": 0.1}) if "tools" not in ctx.kwargs
        else AIMessage(content='{"name": "multiply", "arguments": {"a": 1, "b": 2}}')), mas={"max_tool_iterations": 2})
    assert answer.answer_artifact == "gave up"
    assert [e.event_type for e in sink.events] == ["tool_call", "tool_result"] * 2 + ["act"]


async def test_injection_fires_only_on_a_step_whose_output_it_changes():
    from benchmark.registry import get_benchmark
    from mas.topologies.agent import agent_step
    from mas.llm.injection import InjectionPlan

    plan = InjectionPlan(step=0)
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted")})
    task = get_benchmark("arith").load_tasks(1)[0]
    played = {"benchmark": "arith", "task": task.metadata}  # the double plays the task from its record
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=0, provider_args={"scripted": {"injection": plan, **played}}),
                    question=task.question, injection=plan)
    planner, solver = AgentSpec(name="planner", role="planner", tools=False), AgentSpec(name="solver", role="solver")
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        await agent_step(rt, planner, opening_messages(rt, planner))  # a fixed plan: nothing to get wrong
        assert not plan.fired and plan.fired_at is None
        out = await agent_step(rt, solver, opening_messages(rt, solver))
    assert plan.fired and plan.fired_at == {"agent": "solver", "step": 1}
    honest = await ModelSet(cfg, seed=0, provider_args={"scripted": played}).for_role("solver").model.ainvoke(
        opening_messages(rt, solver), config={"metadata": {"contract": "agent.turn", "mas_actor": "solver",
                                                         "mas_step": 1}}, tools=["calculator"])
    assert out.tool_calls[0].arguments != honest.tool_calls[0]["args"]  # the recorded step really is wrong


def test_parse_answer_salvages_cut_json_and_refuses_tool_calls_as_answers():
    cut = '```json\n{"reasoning": "16 - 3 - 4 = 9", "answer_artifact": "18 \\"dollars\\"", "confidence": 0.'
    a = parse_answer(None, cut)
    assert (a.answer_artifact, a.parse, a.confidence) == ('18 "dollars"', "salvaged", 0.5)
    call = '```json\n{\n  "name": "python",\n  "arguments": {"code": "print(16 - 3'
    b = parse_answer(None, call)
    assert (b.answer_artifact, b.parse) == ("", "tool_call_as_answer")
    c = parse_answer(None, "The answer is 18.")
    assert (c.answer_artifact, c.parse) == ("The answer is 18.", "fallback")
