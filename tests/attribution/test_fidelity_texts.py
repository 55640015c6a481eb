"""The methods as their source texts write them (docs/fidelity.md): one test per item, each failing on the code
before it followed the text."""

from __future__ import annotations

import pytest

from mas.llm.confidence import parse_confidence
from mas.topologies.agent import parse_answer

# ---- confidence: the harness README's rule ("Average confidence") ----------------------------------------------


@pytest.mark.parametrize(("raw", "want"), [
    ("1.5", 1.0), ("-0.2", 0.0), ("0.7", 0.7), (0.25, 0.25), (85, 1.0), ("1e-1", 0.1),
    (None, 0.5), ("high", 0.5), ("9/10", 0.5), ("70%", 0.5), ("", 0.5), ("nan", 0.5), (True, 0.5), ([0.3], 0.5),
])
def test_an_answers_confidence_is_clipped_into_0_1_and_half_when_missing_or_unparsable(raw, want):
    answer = parse_answer({"answer_artifact": "42", "confidence": raw}, "")
    assert answer.confidence == pytest.approx(want)
    assert parse_confidence(raw, 0.5, "clip") == pytest.approx(want)


def test_the_percent_reading_is_one_setting_away():
    from mas.config import ExperimentConfig

    assert ExperimentConfig().mas.confidence_scale == "clip"
    assert parse_answer({"answer_artifact": "42", "confidence": "1.5"}, "", "percent").confidence == 0.015
    assert parse_answer({"answer_artifact": "42", "confidence": "high"}, "", "percent").confidence == 0.8


# ---- the orchestrator's termination judge sees the workers' artifacts (harness README, Progress / stall) -------


def test_the_orchestrators_judge_sees_each_workers_part_beside_its_previous_part(tmp_path, monkeypatch):
    import asyncio
    import json

    import mas.topologies.judge as judge_module
    from benchmark.registry import get_benchmark
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.runner import RunSpec, execute_run

    seen: list[tuple[str, dict]] = []
    real = judge_module.call_llm

    async def recording(model, messages, **kw):
        res = await real(model, messages, **kw)
        if kw.get("contract") == "judge.consensus":
            seen.append((messages[-1].content, kw["metadata"]))
            if len(seen) == 1:  # the first cycle's critic and aggregator agree: say they do not, for a second cycle
                res.parsed = {**res.parsed, "groups": [[0], [1]], "should_stop_for_no_progress": False}
        return res

    monkeypatch.setattr(judge_module, "call_llm", recording)
    cfg = ExperimentConfig(output_root=str(tmp_path), mas={"rounds": 2, "agents": 2},
                           models={"default": ModelRoute(provider="scripted", model="scripted:judge")})
    bench = get_benchmark("arith", None)
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system="orchestrator",
                   task=bench.load_tasks(1)[0], run_index=0, seed=0)
    asyncio.run(execute_run(spec, cfg, bench))
    assert seen
    for prompt, meta in seen:
        workers = [row["agent"] for row in meta["judge_work"]]
        assert workers == ["worker_0", "worker_1"]
        shown = json.loads(prompt.split(judge_module.WORK_HEADER, 1)[1])
        assert [row["agent"] for row in shown] == workers
    later = [meta for _, meta in seen if any("previous_answer" in r for r in meta["judge_work"])]
    assert later and all("previous_answer" in r for meta in later for r in meta["judge_work"])


async def test_the_judge_and_the_lexical_fallback_judge_progress_on_the_same_artifacts():
    from mas.topologies.termination import Candidate, LoopPosition, decide

    def cands(*answers, prefix):
        return [Candidate(agent=f"{prefix}{i}", artifact=a) for i, a in enumerate(answers)]

    got = []

    async def judge(voters, previous, work):
        got.append(work)
        from mas.topologies.termination import ConsensusView, JudgeOutcome
        return JudgeOutcome(view=ConsensusView(groups=[[0], [1]], is_substantive=True))

    workers, before = cands("12", "30", prefix="w"), cands("12", "29", prefix="w")
    await decide(LoopPosition(stage="orchestrator", round=2, max_rounds=3), candidate_artifacts=workers,
                 previous_candidate_artifacts=before, consensus_artifacts=cands("42", "41", prefix="v"),
                 previous_consensus_artifacts=cands("40", "41", prefix="v"), expected_count=2, mode="llm_judge",
                 judge=judge)
    assert [c.agent for c in got[0].current] == ["w0", "w1"] and got[0].previous == before


# ---- SciCode: problem-level success beside sub-step success; sub-steps whose tests compare no target ------------


def _scicode_like(root, outcomes, untargeted=()):
    """Runs of sub-step tasks ``{(task, problem, size): [success of run 0, run 1, ...]}`` under ``sas``."""
    import json

    from tests.descriptor_fixtures import sas_trace, write_run

    import random

    for (task, problem, size), runs in outcomes.items():
        task_dir = root / "scicode" / "sas" / task
        for r, ok in enumerate(runs):
            extra = {"details": {"problem": problem, **({"tests_compare_no_target": True} if task in untargeted
                                                         else {})}}
            write_run(task_dir, r, sas_trace(random.Random(r)), success=ok, benchmark="scicode", system="sas",
                      eval_extra=extra)
            path = task_dir / f"run_{r}.result.json"
            result = json.loads(path.read_text())
            path.write_text(json.dumps({**result, "problem": problem, "problem_tasks": size}))


def test_summary_csv_carries_problem_success_beside_sub_step_success(tmp_path):
    import csv

    from descriptor.summaries import summarize_experiment

    _scicode_like(tmp_path, {("scicode_1.1", "1", 2): [True, True, False], ("scicode_1.2", "1", 2): [True, False, True],
                             ("scicode_2.1", "2", 1): [True, True, True],
                             ("scicode_3.1", "3", 2): [True, True, True]})  # 3.2 never ran: problem 3 is partial
    summary = summarize_experiment(tmp_path, plots=False)
    rows = {r["task_id"]: r for r in csv.DictReader((tmp_path / "scicode" / "sas" / "summary.csv").open())}
    # problem 1 is solved in run 0 only (1.1 fails run 2, 1.2 fails run 1): 1 of 3 runs
    assert rows["scicode_1.1"]["problem"] == "1" and float(rows["scicode_1.1"]["problem_success_rate"]) == pytest.approx(1 / 3, abs=1e-6)
    assert float(rows["scicode_1.1"]["success_rate"]) == pytest.approx(2 / 3, abs=1e-6)  # the sub-step's own rate beside it
    assert float(rows["scicode_2.1"]["problem_success_rate"]) == 1.0
    assert rows["scicode_3.1"]["problem"] == "3" and rows["scicode_3.1"]["problem_success_rate"] == ""
    rollup = summary.rollups[0]
    assert rollup["n_problems"] == 2 and rollup["problem_success_rate"] == pytest.approx((1 / 3 + 1.0) / 2)
    experiment = next(csv.DictReader((tmp_path / "experiment_summary.csv").open()))
    assert float(experiment["problem_success_rate"]) == pytest.approx(rollup["problem_success_rate"], abs=1e-6)


def test_the_report_gives_problem_success_and_marks_passes_whose_tests_compare_no_target(tmp_path):
    import re

    from descriptor.report.build import write_report

    _scicode_like(tmp_path, {("scicode_78.1", "78", 2): [True, False], ("scicode_78.2", "78", 2): [True, True]},
                  untargeted={"scicode_78.2"})
    index = write_report(tmp_path).read_text()
    table = index[index.index('id="problems"'):]
    table = re.sub(r"<[^>]+>", " ", table[:table.index("</table>")])
    assert "1/2 problem-runs" in table and "3/4" in table  # problem 78 in run 0 only; 3 of 4 sub-step runs
    assert "scicode_78.2" in table
    grid = (tmp_path / "report").rglob("*.html")
    marked = [p for p in grid if "its tests compare no target" in p.read_text()]
    assert marked


def test_benchmark_check_lists_the_sub_steps_whose_tests_compare_no_target():
    from benchmark.check import check_benchmark
    from benchmark.registry import get_benchmark

    bench = get_benchmark("scicode")
    tasks = [t for t in bench.load_tasks() if t.metadata["problem"] == "78"]
    bench.load_tasks = lambda limit=None, seed=0: tasks  # problem 78 alone (3 sub-steps)
    bench.evaluate = lambda task, answer, environment=None: __import__("benchmark.base").base.Evaluation(
        success=bool(answer), score=float(bool(answer)))  # the listing needs no sandbox
    report = check_benchmark(bench)
    assert report.untargeted == ["scicode_78.1", "scicode_78.2"]
    assert report.summary()["tests_compare_no_target"] == 2


# ---- Who&When: step-by-step ends at "No error found" (Algorithm 1); the baselines' prompts (appendix G) --------


class _AlwaysNo:
    """A chat model that answers every step-by-step question with "No", recording the prompts it is sent."""

    @staticmethod
    def bound(reply: str = "1. No.\n2. Reason: the step looks right"):
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult

        from mas.config import ModelRoute
        from mas.llm.models import BoundModel
        from mas.scripted.model import ScriptedChatModel

        class Model(ScriptedChatModel):
            prompts: list = []

            def _respond(self, messages, meta, kwargs):
                self.prompts.append("\n".join(str(m.content) for m in messages))
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

        model = Model(seed=0, prompts=[])
        return BoundModel(name="scripted", route=ModelRoute(provider="scripted", model="scripted"), model=model,
                          model_label="scripted"), model


def _traj():
    from attribution.sources.trajectory import Step, Trajectory

    agents = ["human", "Planner", "Coder", "Computer_terminal", "Verifier"]
    steps = [Step(index=i, agent=a, content=f"step {i}: error 404 from {a}" if i == 3 else f"step {i} by {a}")
             for i, a in enumerate(agents)]
    return Trajectory(id="t", subset="s", query="How many clients?", ground_truth="42", final_answer="17",
                      steps=steps, mistake_agent="Coder", mistake_step=2)


@pytest.mark.parametrize("prompts", ["paper", "project"])
async def test_step_by_step_with_no_step_flagged_predicts_nothing_and_is_counted_wrong(prompts):
    from attribution.evaluate import _record, attribution_metrics
    from attribution.methods import METHODS, MethodContext

    model, _ = _AlwaysNo.bound("1. No.\n2. Reason: fine" if prompts == "paper" else '{"reason": "r", "error": "no"}')
    traj = _traj()
    pred = await METHODS["step_by_step"](prompts=prompts)(traj, MethodContext(model=model))
    assert (pred.agent, pred.step) == (None, None) and pred.details["no_error_found"] is True
    metrics = attribution_metrics([_record(traj, pred, 0.0, None)])["all"]
    assert metrics["agent_accuracy"] == 0.0 and metrics["step_accuracy"] == 0.0 and metrics["n_no_prediction"] == 1
    guess = await METHODS["step_by_step"](prompts=prompts, no_flag="heuristic")(traj, MethodContext(model=model))
    assert (guess.agent, guess.step) == ("Coder", 2)  # the heuristic's guess: the actor before the error cue
    assert {"stage": "judge_step", "kind": "no_step_flagged_heuristic"} in guess.details["fallbacks"]


def test_the_baselines_table_labels_g2_binary_search_and_g3_step_by_step():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "attribution.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    assert "G.3" in rows["`step_by_step`"] and "G.2" not in rows["`step_by_step`"]
    assert "G.2" in rows["`binary_search`"] and "G.3" not in rows["`binary_search`"]


def test_the_baselines_prompts_carry_what_appendix_g_gives_the_model():
    from attribution.methods import _whowhen_paper as paper

    traj = _traj()
    g1 = paper.all_at_once_prompt(traj, True, "LOG")
    assert all(part in g1 for part in ("How many clients?", "42", "LOG", "Agent Name:", "Step Number:",
                                       "Reason for Mistake:", "step 0", "still choose"))
    g2 = paper.halve_prompt(traj, True, "SEGMENT", 2, 3, 5)
    assert all(part in g2 for part in ("How many clients?", "42", "SEGMENT", "step 2 to step 5", "steps 2 to 3",
                                       "steps 4 to 5", "'upper half' or 'lower half'", "nothing else"))
    g3 = paper.step_prompt(traj, True, "LOG")
    assert all(part in g3 for part in ("How many clients?", "most recent agent", "overly critical", "1. Yes/No.",
                                       "2. Reason"))
    assert g3.index("LOG") < g3.index("42")  # G.3 gives the answer after the conversation
    assert "42" not in paper.step_prompt(traj, False, "LOG") and "42" not in paper.halve_prompt(traj, False, "S", 0, 0, 1)


def test_the_held_out_baselines_script_prints_both_accuracies_with_wilson_intervals(tmp_path, capsys):
    from tests.scripts_loader import load_script
    from tests.shared_data import WHO_AND_WHEN_HOWTO, shared_data

    dev = shared_data() / "who_and_when" / "dev"
    if not dev.is_dir():
        pytest.skip(WHO_AND_WHEN_HOWTO)
    script = load_script("eval_baselines_heldout")
    assert script.main(["--model", "scripted", "--max-cases", "1", "--methods", "all_at_once,binary_search",
                        "--data", str(dev), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for method in ("all_at_once", "binary_search"):
        line = next(x for x in out.splitlines() if x.startswith(method) and " all " in x)
        assert "n=  2" in line and "agent " in line and "step " in line and "[" in line
    assert script.main(["--model", "scripted", "--methods", "everything", "--data", str(dev),
                        "--out", str(tmp_path)]) == 2


# ---- conformal attribution: Eq. 19 as printed; the scorers' and the rollback's prompts (appendix C.3) ----------


def test_lse_is_eq_19_as_printed_at_beta_0_1_by_hand():
    from attribution.conformal import Aggregator
    from attribution.conformal._aggregators import segment_score

    # trajectory of l = 4 steps, segment = steps 1..2 with scores 0.2 and 0.6, beta = 0.1:
    # beta * l * s = 0.08, 0.24; exp: 1.0832871, 1.2712492; sum 2.3545363; log 0.8563438 (by hand, 7 digits)
    # Eq. 19: (1/0.1) * 0.8563438 - log 4 = 8.563438 - 1.3862944 = 7.177143
    s = [0.9, 0.2, 0.6, 0.1]
    assert segment_score(s, 1, 2, Aggregator(kind="lse", beta=0.1)) == pytest.approx(7.177143, abs=2e-6)
    # the earlier placement, - log l inside the 1/beta: (0.8563438 - 1.3862944) / 0.1 = -5.299506
    assert segment_score(s, 1, 2, Aggregator(kind="lse_inside", beta=0.1)) == pytest.approx(-5.299506, abs=2e-6)
    # at beta = 1 the two agree
    assert segment_score(s, 1, 2, Aggregator(kind="lse", beta=1.0)) == pytest.approx(
        segment_score(s, 1, 2, Aggregator(kind="lse_inside", beta=1.0)))


def test_a_version_3_lse_calibration_is_refused_unless_its_beta_is_one(tmp_path):
    import json

    from attribution.conformal import Aggregator, calibrate_file, load_calibration
    from descriptor.errors import UserError
    from attribution.conformal.evaluation import synthetic_records

    scores = tmp_path / "s.jsonl"
    scores.write_text("".join(r.model_dump_json() + "\n" for r in synthetic_records(12, seed=1)))
    for beta, refused in ((0.1, True), (1.0, False)):
        cal = tmp_path / f"lse-{beta}.json"
        calibrate_file(scores, "rf", 0.2, Aggregator(kind="lse", beta=beta), 0, cal)
        obj = json.loads(cal.read_text())
        cal.write_text(json.dumps({**obj, "version": 3}))
        if refused:
            with pytest.raises(UserError, match="LogSumExp"):
                load_calibration(cal)
        else:
            assert load_calibration(cal).q_hat == obj["q_hat"]


class _Recorder:
    """The scripted double, keeping (contract, prompt) of every call."""

    @staticmethod
    def bound():
        from mas.config import ModelRoute
        from mas.llm.models import BoundModel
        from mas.scripted.model import ScriptedChatModel
        import mas.scripted.responders  # noqa: F401

        class Model(ScriptedChatModel):
            seen: list = []

            def _respond(self, messages, meta, kwargs):
                self.seen.append((meta.get("contract") if isinstance(meta, dict) else None,
                                  "\n".join(str(m.content) for m in messages)))
                return super()._respond(messages, meta, kwargs)

        model = Model(seed=0, seen=[])
        return BoundModel(name="scripted", route=ModelRoute(provider="scripted", model="scripted"), model=model,
                          model_label="scripted"), model


def _marked_traj():
    from attribution.sources.trajectory import Step, Trajectory

    agents = ["human", "Planner", "Coder", "Computer_terminal", "Verifier"]
    steps = [Step(index=i, agent=a, content="ERROR: wrong column" if i == 2 else f"step {i} by {a}")
             for i, a in enumerate(agents)]
    return Trajectory(id="t", subset="s", query="How many clients?", ground_truth="42", final_answer="17",
                      steps=steps, mistake_agent="Coder", mistake_step=2)


async def test_llm_naive_asks_c3s_naive_question_with_the_segment_and_the_whole_conversation():
    from attribution.scorers.base import ScorerContext
    from attribution.scorers.llm import NAIVE_SYSTEM, llm_naive

    model, raw = _Recorder.bound()
    traj = _marked_traj()
    (res,) = await llm_naive()([traj], ScorerContext(model=model, with_ground_truth=True))
    assert max(range(5), key=res.step_scores.__getitem__) == 2 and res.nfe == 5
    first = raw.seen[0][1]
    assert first.startswith(NAIVE_SYSTEM)
    segment, whole = first.split("The segment under review (step 0):", 1)[1].split("The whole conversation:", 1)
    assert "[0] human" in segment and "[4] Verifier" not in segment
    assert "[4] Verifier: step 4 by Verifier" in whole  # the whole conversation, not the log up to the step
    assert all(x in first for x in ("How many clients?", "correct answer to the problem: 42",
                                    "wrong answer the conversation ended with: 17", "ONLY one number between 0 and 1"))


async def test_llm_roles_summarises_the_failure_then_asks_the_four_fixed_roles_in_the_papers_schema():
    from attribution.scorers.base import ScorerContext
    from attribution.scorers.llm import llm_roles

    model, raw = _Recorder.bound()
    traj = _marked_traj()
    (res,) = await llm_roles()([traj], ScorerContext(model=model, with_ground_truth=True))
    prompts = [p for _, p in raw.seen]
    assert "why they failed" in prompts[0]  # the failure summary comes first, once
    roles = [p for p in prompts[1:]]
    assert len(roles) == 4 * traj.n_steps and res.nfe == 1 + 4 * traj.n_steps
    order = [next(r for r in ("Conservative", "Liberal", "Skeptical", "Pattern") if f"the {r} analyst" in p)
             for p in roles[:4]]
    assert order == ["Conservative", "Liberal", "Skeptical", "Pattern"]
    assert all("The team failed at step 2 (Coder)." in p for p in roles)  # the summary reaches every role
    assert all(k in roles[0] for k in ("investigation_summary", "primary_conclusion", "mistake_step", "confidence",
                                       "evidence", "alternative_explanations", "0.8-1.0 very likely"))
    assert max(range(5), key=res.step_scores.__getitem__) == 2
    assert res.details["roles"] == ["Conservative", "Liberal", "Skeptical", "Pattern"]


def test_the_rollback_note_carries_what_appendix_c3s_note_does():
    from attribution.rollback.restart import NOTE_OPENING, rollback_note

    traj = _marked_traj()
    note = rollback_note(traj, 2)
    assert note.startswith(NOTE_OPENING) and "from step 0 to step 4" in note and "do not make it again" in note
    attempt, kept = note.split("The earlier attempt:", 1)[1].split("The history before step 2", 1)
    assert "- step 0 (human)" in attempt and "- step 4 (Verifier)" in attempt  # the whole failed attempt
    assert "judged wrong): '17'" in attempt
    kept, task = kept.split("Solve this task step by step:", 1)
    assert "mostly correct" in kept and "- step 1 (Planner)" in kept and "- step 2" not in kept
    assert task.strip() == "How many clients?"
    assert "(none: the run restarts from its first step)" in rollback_note(traj, 0)


def test_an_empty_set_restarts_at_the_last_step_and_says_so():
    from attribution.rollback.restart import set_choice

    choice = set_choice([], 5)
    assert (choice.members, choice.step, choice.fallback) == ([], 4, True)
    assert "empty set" in set_choice.__doc__ and "--twf-fallback" in set_choice.__doc__


def test_the_fidelity_document_cites_the_texts_and_no_longer_calls_the_benchmarks_missing():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "fidelity.md").read_text(encoding="utf-8")
    assert "exits 2 (unknown benchmark)" not in text and "missing in this branch" not in text
    assert "are not benchmarks here yet" not in text
    for cited in ("harness README, Average confidence", "harness README, Progress / stall judgment",
                  "Who&When A.2, Algorithm 1", "Who&When G.1", "Eq. 19", "C.3 naive scorer", "C.3 rollback note"):
        assert cited in text, cited
