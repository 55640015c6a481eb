"""The real local model through the runtime: a structured call and a tool call (starts llama-server)."""

import pytest
from langchain_core.messages import HumanMessage

from mas.agent import AgentSpec, RunContext, agent_step, opening_messages
from mas.config import ExperimentConfig, ModelRoute
from mas.llm import call_llm
from mas.models import ModelSet, make_chat_model
from mas.prompts import ANSWER_SCHEMA
from mas.tracing import ListCollector, Tracer, use_tracer

pytestmark = pytest.mark.embedded


@pytest.fixture(scope="module")
def cfg():
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="embedded", model="qwen2.5-coder-0.5b",
                                                         temperature=0.0, max_tokens=256)})
    yield cfg
    from mas.llama_server import _release_all

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


async def test_tool_call_through_an_agent_step(cfg):
    rt = RunContext(cfg=cfg, models=ModelSet(cfg, seed=0),
                    question="Use the calculator tool to compute 1234 * 5678. Do not compute it yourself.")
    agent = AgentSpec(name="solver", role="solver")
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        out = await agent_step(rt, agent, opening_messages(rt, agent))
    ev = sink.events[0]
    assert ev.token_in > 0 and ev.token_out > 0
    if out.tool_calls:  # the model followed the text protocol
        assert ev.event_type == "tool_call" and ev.payload["tool_protocol"] in ("text", "native")
        assert out.tool_calls[0].name in ("calculator", "python")
    else:  # it answered directly: still a well-formed answer step
        assert ev.event_type == "finalize" and out.answer is not None
