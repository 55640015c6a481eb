"""The real local model through the runtime: a structured call and a tool call (starts llama-server)."""

import pytest
from langchain_core.messages import HumanMessage

from mas.topologies.agent import AgentSpec, RunContext, agent_step, opening_messages, run_tool_calls
from mas.config import ExperimentConfig, ModelRoute
from mas.llm.call import call_llm
from mas.llm.models import ModelSet, make_chat_model
from mas.topologies.prompts import ANSWER_SCHEMA
from mas.tracing import ListCollector, Tracer, use_tracer

# One event loop for the module: langchain-openai caches its async HTTP client per endpoint, and a pooled
# connection from a closed loop fails the next test with "Event loop is closed" (a run uses one loop).
pytestmark = [pytest.mark.embedded, pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module")
def cfg():
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="embedded", model="qwen2.5-coder-0.5b",
                                                         temperature=0.0, max_tokens=256)})
    yield cfg
    from mas.serving.server import _release_all

    _release_all()  # stop the server this test process started (by PID)


async def test_structured_call_reports_usage(cfg):
    bound = make_chat_model(cfg)
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        res = await call_llm(bound, [HumanMessage("What is 2 + 3? Reply as JSON with reasoning, answer_artifact, confidence.")],
                             contract="agent.turn", actor="solver", json_schema=ANSWER_SCHEMA)
    assert res.parsed is not None and "answer_artifact" in res.parsed
    assert res.token_in > 0 and res.token_out > 0 and res.usage_source in ("provider", "tokenizer")
    assert res.latency_ms > 0 and res.cost_usd == 0.0


RETRY_NOTE = (
    "Do not answer yet and do not compute it yourself. Call the calculator tool now: reply with exactly this "
    'block and nothing else:\n```json\n{"name": "calculator", "arguments": {"expression": "1234 * 5678"}}\n```'
)


async def test_tool_call_through_an_agent_step(cfg):
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=0),
                    question="Use the calculator tool to compute 1234 * 5678. Do not compute it yourself.")
    agent = AgentSpec(name="solver", role="solver")
    history = opening_messages(rt, agent)
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        out = await agent_step(rt, agent, history)
        if not out.tool_calls:  # the 0.5B model sometimes answers directly; ask once more, spelling the call out
            history = [*history, *out.new_messages, HumanMessage(RETRY_NOTE)]
            out = await agent_step(rt, agent, history)
        assert out.tool_calls, f"no tool call, even when asked explicitly; last reply: {sink.events[-1].payload!r}"
        await run_tool_calls(rt, agent, out.tool_calls)
    call = next(e for e in sink.events if e.event_type == "tool_call")
    assert call.token_in > 0 and call.token_out > 0
    assert call.payload.tool_protocol in ("text", "native")
    assert out.tool_calls[0].name in ("calculator", "python")
    result = next(e for e in sink.events if e.event_type == "tool_result")
    assert result.payload.tool_call_id == out.tool_calls[0].id and result.payload.tool == out.tool_calls[0].name
