"""The double's players read the task from its structured fields and the call's hints, picked by the benchmark's
name; the orchestrator's scripted plan and critique read the hints, never the prompt."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from mas.config import ExperimentConfig, ModelRoute, parse_config
from mas.llm.models import ModelSet
from mas.scripted.scripting import ScriptedContext
from mas.scripted.browsecomp import BrowseCompPlayer, grade
from mas.scripted.players import PLAYERS, TaskFields, player_for
from mas.sweep.runner import RunSpec, execute_run
from mas.scripted.orchestrator import critique as scripted_critique
from mas.scripted.orchestrator import plan as scripted_plan
from tests.benchmark.test_browsecomp import bench as browsecomp

CHAIN = {"start": 5, "ops": [["+", 2], ["*", 3]]}  # as a resumed run's record has it: operations as lists
SOLVER = {"contract": "agent.turn", "mas_actor": "solver", "mas_role": "solver", "mas_step": 0}


def ctx(*messages, hints=None, player=None, tools=False) -> ScriptedContext:
    return ScriptedContext(messages=list(messages), metadata={**SOLVER, "hints": hints or {}}, rng=random.Random(0),
                           inject=False, text_tools=False, player=player, kwargs={"tools": ["calculator"]} if tools else {})


def scripted(**args):
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted")})
    return ModelSet(cfg, seed=0, provider_args={"scripted": args}).for_role("solver").model


def test_the_arith_player_solves_its_task_records_chain_with_the_prompt_blank():
    model = scripted(benchmark="arith", task=CHAIN)
    first = model.invoke([HumanMessage("")], config={"metadata": SOLVER}, tools=["calculator"])
    assert first.tool_calls[0]["args"] == {"expression": "5 + 2"}
    second = model.invoke([HumanMessage(""), first, ToolMessage("7", tool_call_id=first.tool_calls[0]["id"])],
                          config={"metadata": SOLVER}, tools=["calculator"])
    assert second.tool_calls[0]["args"] == {"expression": "7 * 3"}


def test_an_arith_question_without_a_named_benchmark_is_not_played():
    question = get_benchmark("arith").load_tasks(1)[0].question  # the double no longer reads it back
    reply = scripted().invoke([HumanMessage(question)], config={"metadata": SOLVER}, tools=["calculator"])
    assert not reply.tool_calls and '"answer_artifact": "0"' in str(reply.content)
    assert player_for("gsm8k", {"start": 5, "ops": [["+", 2]]}, None) is None  # the name picks, not the fields


def test_players_come_from_a_registry_by_benchmark_name_and_acting_benchmarks_replay_by_default():
    assert {"arith", "browsecomp", "scicode", "workbench"} <= set(PLAYERS.names())
    assert PLAYERS.origin("arith") == "mas.scripted.arith:arith_player"
    acting = player_for("someone_elses_tools", {}, [{"name": "search", "args": {"query": "q"}}])
    assert type(acting).__name__ == "ActingPlayer" and acting.actions == [("search", {"query": "q"})]

    @dataclasses.dataclass
    class Digits:
        task: dict

    PLAYERS.register("digit_sum", lambda fields: Digits(dict(fields.task)))  # a plugin's benchmark, its player
    try:
        assert player_for("digit_sum", {"digits": [1, 2]}, None) == Digits({"digits": [1, 2]})
        assert player_for("digit_sum", None, None) == Digits({})
        assert TaskFields().task == {} and TaskFields().oracle_actions is None
    finally:
        PLAYERS.unregister("digit_sum")


def test_the_orchestrators_double_splits_and_checks_from_the_player_and_hints_alone():
    player = player_for("arith", CHAIN, None)
    plan = scripted_plan(ctx(HumanMessage(""), hints={"workers": 3}, player=player))
    assert '"subtasks": ["Start from 5 and apply + 2 in order' in plan and "Write * 3 as a formula in x" in plan
    assert "Check the whole chain from 5" in plan  # a third worker beyond the operations checks the whole chain
    parts = [{"worker": "worker_0", "subtask": "Start from 5 and apply + 2 in order with the calculator; report "
                                              "the number.", "answer": "8", "changes": "none"},
             {"worker": "worker_1", "subtask": "Write * 3 as a formula in x, the number before them; report the "
                                              "formula.", "answer": "(x * 3)", "changes": "none"}]
    call = scripted_critique(ctx(HumanMessage(""), hints={"parts": parts}, player=player, tools=True))
    assert isinstance(call, AIMessage) and call.tool_calls  # the critic recomputes with the calculator first
    verdict = scripted_critique(ctx(HumanMessage(""), hints={"parts": parts}, player=player))  # tools not bound now
    assert '"rejected": ["worker_0"]' in verdict and '"answer_artifact": "21"' in verdict
    assert '"answer_artifact": "0"' in scripted_critique(ctx(HumanMessage(""), hints={"parts": parts}))  # no player


def test_browsecomps_player_reads_own_and_peers_answers_from_hints_and_grades_from_hints():
    player = BrowseCompPlayer.of([{"name": "search", "args": {"query": "Tanners Row"}}])
    own = player.turn(ctx(HumanMessage(""), hints={"own": {"answer": "Exact Answer: A"}}), "debater", True)
    assert '"answer_artifact": "Exact Answer: A"' in own
    peers = [{"answer": "Exact Answer: B"}, {"answer": "Exact Answer: C"}, {"answer": "Exact Answer: c."}]
    assert '"answer_artifact": "Exact Answer: C"' in player.turn(ctx(HumanMessage(""), hints={"peers": peers}),
                                                                 "worker", True)
    task = browsecomp().load_tasks(1)[0]
    fields = browsecomp().judge_fields(task, "Explanation: x\nExact Answer: maren solvik\nConfidence: 60%")
    assert f"[correct_answer]: {fields['correct_answer']}\n" in browsecomp().judge_prompt(task, fields["response"])
    reply = grade(ctx(HumanMessage(""), hints=fields))  # the grading prompt blank: the fields decide
    assert "correct: yes" in reply and "confidence: 60" in reply


async def test_a_benchmark_run_hands_the_double_its_name_and_task_record(tmp_path: Path, scripted_provider):
    seen = []

    def spy(c):
        seen.append(c.player)
        return '{"reasoning": "r", "answer_artifact": "1", "confidence": 0.5}'

    cfg = parse_config({"models": {"default": {"provider": scripted_provider({"agent.turn": spy}),
                                               "model": "scripted"}}})
    bench = get_benchmark("arith", None)
    task = bench.load_tasks(1, seed=0)[0]
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system="sas", task=task,
                   run_index=0, seed=0)
    await execute_run(spec, cfg, bench)
    start, ops = task.metadata["start"], task.metadata["ops"]
    assert seen and seen[0].start == start and seen[0].ops == [tuple(o) for o in ops]
    assert read_trace(spec.paths.trace)
