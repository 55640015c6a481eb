"""The scripted double reads what a call is about from its hints (invoke metadata), not from the prompt's prose."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from langchain_core.messages import HumanMessage

from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from mas.config import parse_config
from mas.scripted.agents import agent_turn
from mas.sweep.runner import RunSpec, execute_run
from mas.systems import SYSTEMS
from mas.scripted.orchestrator import critique as scripted_critique
from mas.scripted.orchestrator import plan as scripted_plan
from mas.scripted.supervisor import supervisor as scripted_supervisor


async def run(tmp_path: Path, system: str, provider: str):
    cfg = parse_config({"models": {"default": {"provider": provider, "model": "scripted"}}})
    bench = get_benchmark("arith", None)
    task = bench.load_tasks(1, seed=0)[0]
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system=system, task=task,
                   run_index=0, seed=0)
    return await execute_run(spec, cfg, bench), read_trace(spec.paths.trace), cfg


async def test_the_supervisors_double_routes_and_answers_without_reading_the_prompt(tmp_path, scripted_provider):
    assert "supervisor" in SYSTEMS
    real = scripted_supervisor
    seen = []

    def blind(ctx):  # the registered answer, shown an empty prompt: only the hints say who and what
        seen.append(ctx.metadata.get("hints"))
        return real(dataclasses.replace(ctx, messages=[HumanMessage("")]))

    result, events, cfg = await run(tmp_path, "supervisor", scripted_provider({"supervisor.route": blind}))
    workers = [f"worker_{i}" for i in range(cfg.mas.agents)]
    assert seen[0]["workers"] == workers
    handoffs = [e.payload.handoff for e in events if getattr(e.payload, "handoff", None)]
    assert handoffs and handoffs[0].to == workers  # it delegated to the roster it was told
    assert result.success  # and answered with the workers' plurality, from the reports it was told


async def test_the_orchestrators_calls_tell_the_worker_count_subtask_and_parts(tmp_path, scripted_provider):
    seen: dict[str, list] = {}

    answers = {"orchestrator.plan": scripted_plan, "orchestrator.critique": scripted_critique, "agent.turn": agent_turn}

    def spy(contract):
        real = answers[contract]

        def answer(ctx):
            seen.setdefault(contract, []).append(ctx.metadata.get("hints") or {})
            return real(ctx)
        return answer

    provider = scripted_provider({c: spy(c) for c in ("orchestrator.plan", "orchestrator.critique", "agent.turn")})
    result, events, cfg = await run(tmp_path, "orchestrator", provider)
    assert result.success
    assert seen["orchestrator.plan"][0]["workers"] == cfg.mas.agents
    parts = seen["orchestrator.critique"][0]["parts"]
    assert [p["worker"] for p in parts] == [f"worker_{i}" for i in range(cfg.mas.agents)]
    assert all(p["subtask"] and p["answer"] for p in parts)
    subtasks = {h["subtask"] for h in seen["agent.turn"] if "subtask" in h}
    assert subtasks == {p["subtask"] for p in parts}


async def test_a_debaters_discussion_turn_tells_its_own_and_its_peers_answers(tmp_path, scripted_provider):
    real = agent_turn
    seen = []

    def spy(ctx):
        if ctx.metadata.get("hints"):
            seen.append((ctx.actor, ctx.metadata["hints"]))
        return real(ctx)

    result, events, cfg = await run(tmp_path, "debate", scripted_provider({"agent.turn": spy}))
    assert result.success and seen
    answers = {}  # each debater's latest answer, from its trace events
    for e in events:
        if e.event_type in ("act", "revise"):
            answers.setdefault(e.actor, []).append(e.payload.content)
    actor, hints = seen[0]
    assert hints["own"]["agent"] == actor and {p["agent"] for p in hints["peers"]} == set(answers) - {actor}
