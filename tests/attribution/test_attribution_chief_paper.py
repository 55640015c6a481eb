"""CHIEF as its Appendices A-F write it (the default, ``variant=paper``): one prompt per stage, the oracle built from
the history and the later steps, backtracking and attribution on the graph; the earlier pipeline is
``variant=project``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from attribution.methods import METHODS, MethodContext
from mas.scripted.model import ScriptedChatModel
from tests.attribution.test_attribution_methods import TRAJS, bound, make_traj

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["decomposition", "otar", "edges", "step_edges", "oracles", "backtracking", "counterfactual_attribution"]


class StageModel(ScriptedChatModel):
    """The scripted double, with some CHIEF stages answered by fixed replies; keeps (stage, meta, prompt) of every
    call."""

    replies: dict = Field(default_factory=dict)
    seen: list = Field(default_factory=list)

    def _respond(self, messages, meta, kwargs):
        stage = meta["contract"].rsplit(".", 1)[-1]
        prompt = "\n".join(str(m.content) for m in messages)
        self.seen.append((stage, dict(meta), prompt))
        if stage not in self.replies:
            return super()._respond(messages, meta, kwargs)
        self.calls += 1
        reply = self.replies[stage]
        reply = reply(meta) if callable(reply) else reply
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=json.dumps(reply)))])

    def prompts(self, stage: str) -> list[tuple[dict, str]]:
        return [(m, p) for s, m, p in self.seen if s == stage]


def run(traj, model: StageModel, **ctx: Any):
    return METHODS["chief"]()(traj, MethodContext(model=bound(model), **ctx))


async def test_one_call_per_appendix_stage_and_the_answer_is_f_s() -> None:
    traj = TRAJS[1]  # the Verifier's step 5 is marked
    model = StageModel(seed=0)
    pred = await run(traj, model)
    assert [s for s, _, _ in model.seen] == STAGES and pred.nfe == 7
    assert (pred.agent, pred.step) == ("Verifier", 5) and pred.details["attribution"]["basis"] == "model"
    graph = pred.details["graph"]
    assert set(graph["oracles"]) == {"S1", "S2"} and graph["subtask_edges"][0]["patterns"]
    assert pred.details["candidates"]["steps"] == [5]
    # The project's earlier pipeline is one option away, with its own stages.
    old = StageModel(seed=0)
    await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(old)))
    assert {s for s, _, _ in old.seen} >= {"decompose", "reflect", "graph", "oracle", "verdict"}
    with pytest.raises(ValueError, match="variant=project"):
        METHODS["chief"](graph="regex")


def four_parts(meta: dict) -> dict:
    n = meta["hints"]["attr_n_steps"]
    q = n // 4
    return {"reflection": "aligned", "subtasks": [{"name": f"part {i + 1}", "start": i * q,
                                                   "end": n - 1 if i == 3 else (i + 1) * q - 1} for i in range(4)]}


async def test_the_oracle_is_built_from_the_history_the_later_steps_and_the_earlier_oracles() -> None:
    traj = make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner", "Coder"], 6)
    model = StageModel(seed=0, replies={"decomposition": four_parts})
    pred = await run(traj, model, max_output_tokens=200)  # a reply holds two oracles: two calls
    calls = model.prompts("oracles")
    assert [m["hints"]["attr_subtasks"] for m, _ in calls] == [["S1", "S2"], ["S3", "S4"]]
    first, second = calls[0][1], calls[1][1]
    # Eq. 2: the history with the steps after the subtask (tau_>k), the retrieved examples (tau_s), the plan ...
    assert all(f"[{i}] " in first for i in range(traj.n_steps)) and "ERROR here" in first
    assert "Reference example 1" in first and "S4 'part 4': steps 6-7" in first
    # ... and the oracles already written (O_<k) as constraints for the later ones.
    assert "previous oracle constraints" not in first
    assert "previous oracle constraints" in second and "goal: goal of S1" in second and "goal: goal of S2" in second
    assert calls[1][0]["hints"]["attr_written"] == ["S1", "S2"]
    assert list(pred.details["graph"]["oracles"]) == ["S1", "S2", "S3", "S4"]


async def test_backtracking_and_attribution_reason_on_the_graph_and_f_decides() -> None:
    traj = make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner"], 5)
    # F names an earlier step than E's candidate (the data-flow origin): F's answer is the prediction.
    model = StageModel(seed=0, replies={"counterfactual_attribution": {
        "reason_for_mistake": "Data-Flow: step 2 first corrupted the value.", "agent_name": "Coder",
        "step_number": 2}})
    pred = await run(traj, model)
    (_, e_prompt), = model.prompts("backtracking")
    (f_meta, f_prompt), = model.prompts("counterfactual_attribution")
    for prompt in (e_prompt, f_prompt):  # the graph: oracles, OTAR, edges with their counterfactual patterns
        assert "oracle: goal: goal of S1" in prompt and "- Verifier: action: acted on it" in prompt
        assert "S1 -> S2 (data_dependency); a wrong value upstream => a wrong result downstream" in prompt
    assert "reverse topological order" in e_prompt and "Acceptance Criteria" in e_prompt
    assert "candidate error steps: [5] Verifier" in f_prompt and f_meta["hints"]["attr_candidate_steps"] == [5]
    for stage in ("Local attribution", "Planning-control", "Data-flow", "Final screening"):
        assert stage in f_prompt, stage
    assert (pred.agent, pred.step) == ("Coder", 2) and "Data-Flow" in pred.details["attribution"]["reason"]


async def test_graph_replies_are_checked_against_the_log() -> None:
    traj = make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner", "Coder"], 6)
    pattern = [{"bias": "b", "anomaly": "a"}]
    model = StageModel(seed=0, replies={
        "decomposition": four_parts,
        "edges": {"edges": [
            {"from": "S1", "to": "S2", "subtask": None, "type": "logical_prereq", "counterfactual_patterns": pattern},
            {"from": "S1", "to": "S3", "subtask": None, "type": "data_dependency", "counterfactual_patterns": []},
            {"from": "Planner", "to": "Coder", "subtask": "S4", "type": "decision_dependency",
             "counterfactual_patterns": pattern},
            {"from": "Planner", "to": "Verifier", "subtask": "S4", "type": "obs_dependency",
             "counterfactual_patterns": []}]},  # the Verifier does not act in S4 (steps 6-7)
        "step_edges": {"step_edges": [
            {"upstream": 2, "output_data": "17", "output_type": "numeric", "downstream": 5, "input_data": "17",
             "input_type": "numeric"},
            {"upstream": 6, "output_data": "x", "output_type": "text", "downstream": 4, "input_data": "x",
             "input_type": "text"}]},  # backwards in time
    })
    graph = (await run(traj, model)).details["graph"]
    assert [(e["src"], e["dst"]) for e in graph["subtask_edges"]] == [(0, 1)]
    assert [(e["src"], e["dst"], e["subtask"]) for e in graph["agent_edges"]] == [("Planner", "Coder", 3)]
    assert [(e["upstream"], e["downstream"], e["upstream_agent"]) for e in graph["step_edges"]] == [(2, 5, "Coder")]


async def test_the_decomposition_shows_the_exemplars_as_a_question_and_its_steps() -> None:
    model = StageModel(seed=0)
    pred = await run(TRAJS[0], model)
    (meta, prompt), = model.prompts("decomposition")
    from attribution.methods.chief.exemplars import load_pool

    pool = {ex["id"]: ex for ex in load_pool()}
    ids = [e["id"] for e in pred.details["exemplars"]]
    assert len(ids) == 2
    for n, i in enumerate(ids, 1):
        steps = " ".join(f"{k}. {s['name']}." for k, s in enumerate(pool[i]["subtasks"], 1))
        assert f"[Reference example {n}]\nQuestion: " in prompt and f"Steps: {steps}" in prompt
        assert pool[i]["log"] not in prompt  # GAIA's form: no example log
    assert "Evidence alignment" in prompt and "no overlap" in prompt


def test_the_docs_no_longer_say_chiefs_appendices_were_out_of_reach() -> None:
    for path in ("attribution/README.md", "attribution/methods/chief/method.py", "attribution/methods/echo/context.py",
                 "docs/fidelity.md", "docs/guide/attribution.md", "docs/guide/attribution-methods.md",
                 "docs/benchmarks.md"):
        text = (ROOT / path).read_text(encoding="utf-8")
        for claim in ("not reachable", "were not reachable", "was not available here", "in none of the sources"):
            assert claim not in text, (path, claim)
