"""CHIEF as its paper defines it: the causal graph by a model call (the regex graph as a recorded fallback),
retrieved exemplars that never come from an evaluated record, and backtracking top-down in reverse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import main
from attribution.methods import METHODS, MethodContext
from attribution.methods.chief.exemplars import is_pool_record, load_pool, retrieve
from attribution.methods.chief.graph import CausalGraph, Subtask, build_graph, corrected_downstream, repair_subtasks
from attribution.methods.chief.levels import backtrack
from attribution.sources.trajectory import Step, Trajectory
from mas.scripted.model import ScriptedChatModel
from tests.scripts_loader import load_script
from tests.attribution.test_attribution_data import DEV, needs_dev
from tests.attribution.test_attribution_methods import TRAJS, RecordingModel, bound, make_traj, shown_lines


async def test_chief_builds_its_causal_graph_with_a_model_call() -> None:
    model = RecordingModel(seed=0)
    traj = TRAJS[1]
    pred = await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(model)))
    graph_calls = [m for m, _ in model.seen if m["contract"] == "attribution.chief.graph"]
    assert len(graph_calls) == 1 and graph_calls[0]["hints"]["attr_range"] == [0, traj.n_steps - 1]
    assert pred.details["graph_source"] == "model"
    assert pred.details["otar"]["0:planner"]["observation"] == "the previous step"  # the scripted model's tuple
    assert pred.step == traj.mistake_step
    regex_model = RecordingModel(seed=0)
    regex = await METHODS["chief"](variant="project", graph="regex")(traj, MethodContext(model=bound(regex_model)))
    assert not any(m["contract"] == "attribution.chief.graph" for m, _ in regex_model.seen)
    assert regex.details["graph_source"] == "regex" and regex.nfe == pred.nfe - 1


class NoGraphModel(ScriptedChatModel):
    """Answers every contract as scripted, except the graph, which it answers with prose."""

    def _respond(self, messages, meta, kwargs):
        if meta.get("contract") != "attribution.chief.graph":
            return super()._respond(messages, meta, kwargs)
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="The steps depend on each other."))])


async def test_an_unusable_model_graph_falls_back_to_the_regex_graph_and_says_so() -> None:
    pred = await METHODS["chief"](variant="project")(TRAJS[1], MethodContext(model=bound(NoGraphModel(seed=0))))
    assert pred.details["graph_source"] == "regex"
    assert {"stage": "graph", "kind": "regex_graph"} in pred.details["fallbacks"]
    assert pred.step == TRAJS[1].mistake_step


def subtasks(*spans: tuple[int, int]) -> list[Subtask]:
    return [Subtask(index=i, name=f"s{i}", start=a, end=b) for i, (a, b) in enumerate(spans)]


def graph(subs: list[Subtask], data: tuple[tuple[int, int], ...] = ()) -> CausalGraph:
    edges = [{"level": "subtask", "src": a.index, "dst": b.index, "type": "sequential"} for a, b in zip(subs, subs[1:])]
    edges += [{"level": "subtask", "src": a, "dst": b, "type": "data"} for a, b in data]
    return CausalGraph(subtasks=subs, otar={}, edges=edges)


def verdicts(*satisfied: bool) -> list[dict]:
    return [{"subtask": i, "satisfied": s} for i, s in enumerate(satisfied)]


def test_backtracking_walks_subtasks_in_reverse_along_failed_parents() -> None:
    subs = subtasks((0, 2), (3, 5), (6, 8), (9, 10))
    # From the last failed subtask back; a satisfied subtask stops the walk (the first failed one is not the origin).
    origin, path = backtrack(subs, verdicts(False, True, False, True), graph(subs))
    assert (origin.index, path) == (2, [2])
    origin, path = backtrack(subs, verdicts(True, False, False, False), graph(subs))
    assert (origin.index, path) == (1, [3, 2, 1])
    # A data edge from an earlier failed subtask is followed over a satisfied one.
    origin, path = backtrack(subs, verdicts(False, True, False, True), graph(subs, data=((0, 2),)))
    assert (origin.index, path) == (0, [2, 0])
    # Nobody admits failure: the last subtask.
    assert backtrack(subs, verdicts(True, True, True, True), graph(subs)) == (subs[-1], [])


class ThreePartModel(ScriptedChatModel):
    """Splits every log into three subtasks of three steps."""

    def _respond(self, messages, meta, kwargs):
        if meta.get("contract") != "attribution.chief.decompose":
            return super()._respond(messages, meta, kwargs)
        self.calls += 1
        spans = [{"name": f"part {i}", "start": 3 * i, "end": 3 * i + 2} for i in range(3)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=json.dumps({"reason": "r", "subtasks": spans})))])


def two_errors(shared_value: bool) -> Trajectory:
    agents = ["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner", "Coder", "Verifier"]
    traj = make_traj(agents, 1)
    late = "ERROR again: the Coder reports the total 4242." if shared_value else "ERROR again: the Coder reports a wrong total."
    early = "ERROR here: Planner plans on 4242 rows." if shared_value else "ERROR here: Planner plans on the wrong rows."
    steps = [s.model_copy(update={"content": {1: early, 7: late}.get(s.index, f"Plain step by {s.agent}.")}) for s in traj.steps]
    return traj.model_copy(update={"steps": steps})


async def test_chief_starts_backtracking_at_the_last_failed_subtask() -> None:
    pred = await METHODS["chief"](variant="project")(two_errors(False), MethodContext(model=bound(ThreePartModel(seed=0))))
    assert [o["satisfied"] for o in pred.details["oracles"]] == [False, True, False]
    assert pred.details["backtrack"] == [2] and pred.step == 7  # the first failed subtask would have given step 1
    linked = await METHODS["chief"](variant="project")(two_errors(True), MethodContext(model=bound(ThreePartModel(seed=0))))
    assert linked.details["backtrack"] == [2, 0] and linked.details["failed_subtask"] == 0  # the shared value links them


def test_retrieval_never_returns_the_case_itself_or_its_question() -> None:
    pool = load_pool()
    assert len(pool) == 11 and all(ex["subtasks"] and ex["log"] for ex in pool)
    ex = pool[0]
    own = Trajectory(id=ex["id"], query=ex["question"], steps=[Step(index=0, agent=ex["agents"][0], content=ex["log"])])
    assert is_pool_record(own)
    assert ex["id"] not in [e["id"] for e, _ in retrieve(own, k=len(pool))] and len(retrieve(own, k=99)) == len(pool) - 1
    same_question = own.model_copy(update={"id": "hand_crafted/999"})  # another record of the same task
    assert not is_pool_record(same_question)
    assert ex["id"] not in [e["id"] for e, _ in retrieve(same_question, k=len(pool))]
    other = TRAJS[0]
    ranked = retrieve(other, k=3)
    assert len(ranked) == 3 and ranked[0][1] >= ranked[1][1] >= ranked[2][1]


async def test_decomposition_prompt_shows_the_retrieved_exemplars() -> None:
    model = RecordingModel(seed=0)
    pred = await METHODS["chief"](variant="project")(TRAJS[0], MethodContext(model=bound(model)))
    meta, prompt = next((m, p) for m, p in model.seen if m["contract"] == "attribution.chief.decompose")
    ids = [e["id"] for e in pred.details["exemplars"]]
    assert meta["hints"]["attr_exemplars"] == ids and len(ids) == 2
    pool = {ex["id"]: ex for ex in load_pool()}
    assert all(pool[i]["log"] in prompt for i in ids) and "Example 2 subtasks:" in prompt


def test_attribute_leaves_the_exemplar_pool_records_out_of_the_evaluation(tmp_path: Path, capsys) -> None:
    ex = load_pool()[0]
    subset, number = ex["id"].split("/")
    record = {"question": ex["question"], "ground_truth": "8", "mistake_agent": "Planner", "mistake_step": "1",
              "history": [{"content": "task", "name": "Planner", "role": "user"},
                          {"content": "ERROR wrong plan", "name": "Planner", "role": "user"},
                          {"content": "done", "name": "Coder", "role": "user"}]}
    for name, rec in [(number, record), ("999", {**record, "question": "Another task entirely?"})]:
        path = tmp_path / "ww" / subset / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec), encoding="utf-8")
    out = tmp_path / "chief"
    assert main.main(["attribute", "--data-dir", str(tmp_path / "ww"), "--method", "chief", "--model", "scripted",
                      "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["excluded_training_records"] == [ex["id"]] and results["n_cases"] == 1
    assert [json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()] == [f"{subset}/999"]
    assert "left out 1 record(s)" in capsys.readouterr().out


@needs_dev
def test_the_committed_exemplar_pool_is_what_the_build_script_makes(tmp_path: Path) -> None:
    script = load_script("build_chief_exemplars")
    assert script.main(["--data-dir", str(DEV), "--out", str(tmp_path / "pool.json")]) == 0
    committed = Path(__file__).resolve().parents[2] / "attribution" / "methods" / "chief" / "exemplars.json"
    assert (tmp_path / "pool.json").read_text() == committed.read_text()
    assert all(script.in_training_part(*ex["id"].split("/")[0:1], int(ex["id"].split("/")[1]), ex["n_steps"])
               for ex in json.loads(committed.read_text())["exemplars"])


def test_compare_predictions_script_puts_two_runs_side_by_side_on_common_cases(tmp_path: Path, capsys) -> None:
    from tests.attribution.test_attribution_echo_vote import write_case

    for traj in TRAJS[:2]:
        write_case(tmp_path / "ww", traj)
    base = ["attribute", "--data-dir", str(tmp_path / "ww"), "--method", "chief", "--model", "scripted",
            "--method-option", "variant=project"]
    assert main.main([*base, "--out", str(tmp_path / "old"), "--method-option", "graph=regex"]) == 0
    assert main.main([*base, "--out", str(tmp_path / "new"), "--max-cases", "1"]) == 0
    script = load_script("compare_predictions")
    res = script.compare(script.read(tmp_path / "old"), script.read(tmp_path / "new"))
    assert res["old"]["all"]["n"] == res["new"]["all"]["n"] == 1  # only the case both runs finished
    assert res["old"]["all"]["mean_nfe"] == res["new"]["all"]["mean_nfe"] - 1  # the graph call
    capsys.readouterr()
    assert script.main([str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    assert "old" in capsys.readouterr().out


def test_retrieval_ranks_exemplars_by_tf_idf_so_words_every_exemplar_shares_do_not_decide() -> None:
    def ex(i: str, log: str) -> dict:
        return {"id": f"pool/{i}", "question": "", "agents": [], "log": log, "subtasks": [[0, 0]]}

    pool = (ex("A", "the agent wrote the code for the table"), ex("B", "awning sunset design for the clients"),
            ex("C", "the agent read the table and the agent ran the code"), ex("D", "the agent checked the table"))
    case = Trajectory(id="case", query="the agent counted the awning clients in the table",
                      steps=[Step(index=0, agent="x", content="")])
    ranked = retrieve(case, k=4, pool=pool)
    # The rare words (awning, clients) decide; the earlier cosine of log-scaled counts ranked D first.
    assert ranked[0][0]["id"] == "pool/B"


async def test_the_oracle_is_synthesised_without_the_steps_and_judged_in_a_call_of_its_own() -> None:
    model = RecordingModel(seed=0)
    traj = TRAJS[1]
    pred = await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(model)))
    synthesis = [p for m, p in model.seen if m["contract"] == "attribution.chief.oracle"]
    verdict = [p for m, p in model.seen if m["contract"] == "attribution.chief.verdict"]
    assert len(synthesis) == 1 and len(verdict) == 1
    assert not shown_lines(synthesis[0]) and "ERROR" not in synthesis[0]  # criteria written before reading the steps
    assert shown_lines(verdict[0]) and "acceptance: no ERROR" in verdict[0]  # the steps judged against the oracle
    assert [o["satisfied"] for o in pred.details["oracles"]] == [True, False]
    assert pred.details["oracles"][0]["acceptance"] == "no ERROR" and pred.step == traj.mistake_step


class ReflectModel(ScriptedChatModel):
    """Answers every contract as scripted, except the reflection, which it answers with ``reflection``."""

    reflection: str = ""

    def _respond(self, messages, meta, kwargs):
        if meta.get("contract") != "attribution.chief.reflect":
            return super()._respond(messages, meta, kwargs)
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reflection))])


async def test_reflection_is_a_model_call_whose_corrected_subtasks_are_used_and_the_repair_its_fallback() -> None:
    traj = TRAJS[1]  # the scripted decomposition overlaps at step 3 and misses step 6
    fixed = json.dumps({"problems": "overlap", "subtasks": [{"name": "a", "start": 0, "end": 1},
                                                            {"name": "b", "start": 2, "end": 6}]})
    pred = await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(ReflectModel(seed=0, reflection=fixed))))
    assert [(s["start"], s["end"]) for s in pred.details["subtasks"]] == [(0, 1), (2, 6)]
    assert pred.details["decomposition"] == "reflected" and pred.step == traj.mistake_step
    prose = await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(ReflectModel(seed=0, reflection="Looks fine."))))
    assert [(s["start"], s["end"]) for s in prose.details["subtasks"]] == [(0, 3), (4, 6)]  # the repaired proposal
    assert prose.details["decomposition"] == "model"
    assert {"stage": "reflect", "kind": "repair"} in prose.details["fallbacks"]
    no_call = await METHODS["chief"](variant="project", reflect=False)(traj, MethodContext(model=bound(RecordingModel(seed=0))))
    assert no_call.nfe == pred.nfe - 1 and no_call.details["decomposition"] == "model"


def with_texts(traj: Trajectory, texts: dict[int, str]) -> Trajectory:
    steps = [s.model_copy(update={"content": texts[s.index]}) if s.index in texts else s for s in traj.steps]
    return traj.model_copy(update={"steps": steps})


async def test_a_rejected_candidate_sends_the_search_back_to_the_next_agent_then_the_next_subtask() -> None:
    # Subtasks (0-3) and (4-6) both fail their oracles; the origin's marked step did no harm.
    traj = with_texts(make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner"], 5),
                      {2: "ERROR HARMLESS: a warning that changed nothing."})
    pred = await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(RecordingModel(seed=0))))
    assert pred.details["backtrack"] == [1, 0] and pred.details["candidate_subtasks"] == [0, 1]
    tried = [(t["subtask"], t["agent"], t["start"], t["stop"]) for t in pred.details["search"]]
    assert tried == [(0, "Coder", 2, "rejected"), (0, "Planner", 1, "rejected"),
                     (1, "Verifier", 5, "no_earlier_corruption")]
    assert (pred.agent, pred.step) == ("Verifier", 5)


async def test_an_executor_that_followed_a_wrong_plan_hands_the_blame_to_the_planner() -> None:
    agents = ["human", "Planner", "Coder", "Computer_terminal", "Verifier"]
    traj = with_texts(make_traj(agents, 2), {1: "Plan: BADPLAN, step 1: sum the 2019 sheet.",
                                              2: "ERROR PLANNED: summing the 2019 sheet as planned gives 17."})
    pred = await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(RecordingModel(seed=0))))
    hops = pred.details["counterfactuals"]
    assert hops[0]["plan_step"] == 1 and hops[0]["hop"] == "planner"
    assert (pred.agent, pred.step) == ("Planner", 1)
    deviated = with_texts(traj, {2: "ERROR: I used the 2018 sheet instead and got 17."})  # a plan, not followed
    kept = await METHODS["chief"](variant="project")(deviated, MethodContext(model=bound(RecordingModel(seed=0))))
    assert kept.details["counterfactuals"][0]["followed_plan"] is False
    assert (kept.agent, kept.step) == ("Coder", 2)


async def test_the_data_flow_walk_does_not_follow_an_edge_whose_counterfactual_pattern_is_corrects() -> None:
    agents = ["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier"]
    texts = {2: "SOURCE value 1717 computed from the wrong sheet.",
             4: "ERROR total is 1717 using the STALE value."}
    passed_on = await METHODS["chief"](variant="project")(with_texts(make_traj(agents, 4), texts), MethodContext(model=bound(RecordingModel(seed=0))))
    assert passed_on.step == 2 and passed_on.details["edge_patterns"]["propagates"] >= 1
    texts[4] = "ERROR total is 1717 using the STALE value; CORRECTS it after checking the sheet."
    caught = await METHODS["chief"](variant="project")(with_texts(make_traj(agents, 4), texts), MethodContext(model=bound(RecordingModel(seed=0))))
    assert caught.details["edge_patterns"]["corrects"] >= 1
    assert caught.details["counterfactuals"][0]["source_step"] is None and caught.step == 4
    # The regex graph reads the pattern from a correction cue in the later step.
    traj = with_texts(make_traj(agents, 4), {2: "The value is 1717.", 4: "I corrected 1717 to 1771 after checking."})
    graph = build_graph(traj, repair_subtasks([{"start": 0, "end": 5}], traj.n_steps))
    assert {(e["src"], e["dst"], e["pattern"]) for e in graph.edges if e["level"] == "step"} == {(2, 4, "corrects")}
    assert graph.data_ancestors(4) == [] and corrected_downstream(graph, 2) == 4
