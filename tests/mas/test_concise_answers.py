"""The quickstart's levers: ``mas.builtin_tools = false`` and ``mas.reasoning_max_chars`` (config/quickstart.toml)."""

import json
from pathlib import Path

import mas.topologies.agent as agent_module
from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from mas.config import load_config, parse_config
from mas.sweep.runner import RunSpec, execute_run
from mas.topologies.prompts import ANSWER_FORMAT, TOOL_PROTOCOL

ROOT = Path(__file__).resolve().parents[2]


async def _run(tmp_path, system, cfg):
    bench = get_benchmark("arith", None)
    task = bench.load_tasks(1, seed=0)[0]
    spec = RunSpec(experiment_id="e", output_root=Path(tmp_path), benchmark="arith", system=system, task=task,
                   run_index=0, seed=0)
    result = await execute_run(spec, cfg, bench)
    return result, read_trace(spec.paths.trace)


async def test_without_builtin_tools_every_answer_is_one_schema_bound_call_and_no_prompt_mentions_tools(
        tmp_path, scripted_provider, monkeypatch):
    seen, schemas = [], []

    def answer(ctx):
        seen.append(ctx)
        return json.dumps({"reasoning": "short", "answer_artifact": "1", "confidence": 0.5})

    real_call = agent_module.call_llm

    async def spy(*args, **kwargs):
        schemas.append(kwargs.get("json_schema"))
        return await real_call(*args, **kwargs)

    monkeypatch.setattr(agent_module, "call_llm", spy)
    provider = scripted_provider({"agent.turn": answer})
    cfg = parse_config({"models": {"default": {"provider": provider, "model": "scripted"}},
                        "mas": {"builtin_tools": False, "reasoning_max_chars": 120, "agents": 2, "max_rounds": 1}})
    for system in ("sas", "debate"):
        result, events = await _run(tmp_path / system, system, cfg)
        assert result.status == "finished" and not any(e.event_type == "tool_call" for e in events)
    assert seen and all("tools" not in ctx.kwargs for ctx in seen)
    systems = {str(ctx.messages[0].content) for ctx in seen}
    assert all(TOOL_PROTOCOL not in s and "calculator" not in s and ANSWER_FORMAT in s for s in systems)
    # no agent is told it "used all its tool calls": it never had any
    assert not any("used all your tool calls" in str(m.content) for ctx in seen for m in ctx.messages)
    assert schemas and all(s["properties"]["reasoning"]["maxLength"] == 120 for s in schemas)


async def test_by_default_agents_get_the_calculator_and_its_protocol(tmp_path, scripted_provider,
                                                                                monkeypatch):
    seen, schemas = [], []
    real_call = agent_module.call_llm

    async def spy(*args, **kwargs):
        schemas.append(kwargs.get("json_schema"))
        return await real_call(*args, **kwargs)

    monkeypatch.setattr(agent_module, "call_llm", spy)
    provider = scripted_provider({"agent.turn": lambda ctx: seen.append(ctx) or json.dumps(
        {"reasoning": "r", "answer_artifact": "1", "confidence": 0.5})})
    result, _ = await _run(tmp_path, "sas", parse_config({"models": {"default": {"provider": provider,
                                                                                  "model": "scripted"}}}))
    assert result.status == "finished"
    assert TOOL_PROTOCOL in str(seen[0].messages[0].content) and "tools" in seen[0].kwargs
    # the first call offers tools, so no schema; a schema-bound answer only where tools are not offered
    assert schemas[0] is None


def test_the_quickstart_config_is_valid_and_pulls_the_levers():
    cfg = load_config(ROOT / "config" / "quickstart.toml")
    assert cfg.route("default").provider == "embedded" and cfg.route("default").max_tokens == 512
    assert cfg.mas.builtin_tools is False and cfg.mas.reasoning_max_chars <= 400 and cfg.mas.max_rounds == 1
    assert cfg.mas.final_vote_mode == "lexical"  # the 0.5B judge votes by position (config/quickstart.toml says)
