"""Attribution data side: Who&When and run loaders, the random method, metrics, the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import main
from attribution.evaluate import CaseRecord, agent_correct, attribution_metrics, step_within
from attribution.sources.loaders import load_run, load_runs_dir, load_who_and_when_dir, load_who_and_when_file
from attribution.methods import METHODS, MethodContext, get_method
from attribution.sources.trajectory import Step, Trajectory, normalize_agent
from descriptor.errors import UserError
from tests.shared_data import needs_who_and_when, shared_data

DEV = shared_data() / "who_and_when" / "dev"
needs_dev = needs_who_and_when


def write_wnw(root: Path, subset: str, name: str, record: dict) -> Path:
    path = root / subset / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def ag_record(step: str = "2") -> dict:
    return {
        "question": "How many?", "ground_truth": "8", "mistake_agent": "Excel_Expert", "mistake_step": step,
        "mistake_reason": "bad code", "history": [
            {"content": "task", "name": "Excel_Expert", "role": "assistant"},
            {"content": "plan", "name": "Planner_Expert", "role": "user"},
            {"content": "```python\nprint(1)\n```", "name": "Excel_Expert", "role": "user"},
            {"content": "exitcode: 0", "name": "Computer_terminal", "role": "user"},
        ],
    }


def hc_record() -> dict:
    return {
        "question": "Where?", "ground_truth": "There", "mistake_agent": "Websurfer", "mistake_step": "3",
        "history": [
            {"content": "Where?", "role": "human"},
            {"content": "plan", "role": "Orchestrator (thought)"},
            {"content": "go search", "role": "Orchestrator (-> WebSurfer)"},
            {"content": "clicked a wrong page", "role": "WebSurfer"},
        ],
    }


def test_normalize_agent() -> None:
    assert normalize_agent("Orchestrator (-> WebSurfer)") == "orchestrator"
    assert normalize_agent("Websurfer") == normalize_agent("WebSurfer") == "websurfer"
    assert normalize_agent(None) == ""


def test_who_and_when_both_subsets(tmp_path: Path) -> None:
    write_wnw(tmp_path, "algorithm_generated", "1", ag_record())
    write_wnw(tmp_path, "hand_crafted", "7", hc_record())
    res = load_who_and_when_dir(tmp_path, "all")
    assert res.skipped == []
    ag, hc = res.trajectories
    assert ag.id == "algorithm_generated/1" and ag.mistake_step == 2 and isinstance(ag.mistake_step, int)
    assert [s.agent for s in ag.steps] == ["Excel_Expert", "Planner_Expert", "Excel_Expert", "Computer_terminal"]
    assert ag.steps[1].role == "user" and ag.ground_truth == "8"
    assert hc.id == "hand_crafted/7" and hc.mistake_step == 3
    assert hc.steps[2].agent == "Orchestrator (-> WebSurfer)" and hc.steps[2].agent_key == "orchestrator"
    assert hc.steps[2].role == "-> WebSurfer" and hc.steps[1].role == "thought"
    assert hc.agent_keys == ["human", "orchestrator", "websurfer"]
    assert normalize_agent(hc.mistake_agent) == hc.steps[3].agent_key
    only = load_who_and_when_dir(tmp_path, "hand_crafted").trajectories
    assert [t.id for t in only] == ["hand_crafted/7"]
    assert [t.id for t in load_who_and_when_dir(tmp_path / "algorithm_generated").trajectories] == [ag.id]


@pytest.mark.parametrize("record, field", [
    ("{not json", "not valid JSON"),
    ({"question": "q", "mistake_step": "0"}, "'history'"),
    ({**ag_record(), "mistake_step": "two"}, "'mistake_step'"),
    ({**ag_record(), "mistake_step": "9"}, "outside the 4 steps"),
    ({**ag_record(), "history": [{"content": "x", "role": "user"}, {"content": "y"}]}, "history[1]"),
])
def test_malformed_files_are_skipped_by_name(tmp_path: Path, record: object, field: str) -> None:
    write_wnw(tmp_path, "algorithm_generated", "1", ag_record())
    bad = tmp_path / "algorithm_generated" / "2.json"
    bad.write_text(record if isinstance(record, str) else json.dumps(record), encoding="utf-8")
    res = load_who_and_when_dir(tmp_path, "algorithm_generated")
    assert [t.id for t in res.trajectories] == ["algorithm_generated/1"]
    assert len(res.skipped) == 1 and res.skipped[0].path == str(bad) and field in res.skipped[0].reason


def test_missing_data_dir_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        load_who_and_when_dir(tmp_path / "nope")
    with pytest.raises(UserError, match="no algorithm_generated or hand_crafted"):
        load_who_and_when_dir(tmp_path)


@needs_dev
def test_real_dev_split_counts_and_labels() -> None:
    res = load_who_and_when_dir(DEV, "all")
    assert res.skipped == []
    by = {s: [t for t in res.trajectories if t.subset == s] for s in ("algorithm_generated", "hand_crafted")}
    assert len(by["algorithm_generated"]) == 84 and len(by["hand_crafted"]) == 39
    for t in res.trajectories:
        assert 0 <= t.mistake_step < t.n_steps
        assert normalize_agent(t.mistake_agent) in t.agent_keys, t.id
    raw = json.loads((DEV / "hand_crafted" / "1.json").read_text(encoding="utf-8"))
    t = load_who_and_when_file(DEV / "hand_crafted" / "1.json")
    assert t.mistake_step == int(raw["mistake_step"]) and t.n_steps == len(raw["history"])


# ---------------------------------------------------------------- runs

from tests.descriptor_fixtures import T0, metadata_record, result_record, typed_payload


def ev(actor: str, kind: str, state: str | None = None, **payload: object) -> dict:
    return {"version": 2, "run_id": "r", "seq": 0, "timestamp_start": T0, "timestamp_end": T0, "actor": actor,
            "event_type": kind, "payload": typed_payload(actor, kind, payload), "state_id": state}


def write_run(task: Path, r: int, events: list[dict], *, success: bool, injected: dict | None = None,
              finished: bool = True, meta: dict | None = None) -> None:
    task.mkdir(parents=True, exist_ok=True)
    (task / f"run_{r}.trace.jsonl").write_text("".join(json.dumps({**e, "seq": i}) + "\n"
                                                       for i, e in enumerate(events)), encoding="utf-8")
    (task / f"run_{r}.answer.txt").write_text("41", encoding="utf-8")
    m = meta if meta is not None else metadata_record(task, r, injected=injected)
    (task / f"run_{r}.metadata.json").write_text(json.dumps(m), encoding="utf-8")
    if finished:
        (task / f"run_{r}.result.json").write_text(json.dumps(result_record(task, r, success=success)),
                                                   encoding="utf-8")


def run_events() -> list[dict]:
    return [
        ev("system:runtime", "plan", content="start"),
        ev("planner", "plan", "ck0", content="multiply 6 by 7", role="planner", step_index=0),
        ev("solver", "tool_call", "ck1", tool="calc", arguments={"expr": "6*8"}, tool_call_id="c1", step_index=1),
        ev("tool:calc", "tool_result", ok=False, output="bad expression", tool_call_id="c1"),
        ev("system:controller", "verify", content="check"),
        ev("solver", "finalize", "ck2", content="41", role="solver", step_index=2),
    ]


def test_runs_loader_maps_steps_and_labels(tmp_path: Path) -> None:
    task = tmp_path / "arith" / "sas" / "t0"
    write_run(task, 0, run_events(), success=False, injected={"agent": "solver", "step": 1})
    write_run(task, 1, run_events(), success=True)
    write_run(task, 2, run_events(), success=False, finished=False)
    res = load_runs_dir(tmp_path)
    assert res.skipped == [] and [t.id for t in res.trajectories] == ["arith/sas/t0/run_0"]
    t = res.trajectories[0]
    assert t.subset == "runs" and t.query == "What is 6*7?" and t.ground_truth == "42" and t.final_answer == "41"
    assert [s.agent for s in t.steps] == ["planner", "solver", "solver"]
    assert [s.state_id for s in t.steps] == ["ck0", "ck1", "ck2"]
    assert [s.kind for s in t.steps] == ["plan", "tool_call", "finalize"]
    assert t.steps[0].role == "planner" and t.steps[0].content == "multiply 6 by 7"
    assert '"tool":"calc"' in t.steps[1].content and "tool error: bad expression" in t.steps[1].content
    assert t.mistake_agent == "solver" and t.mistake_step == 1
    assert [x.id for x in load_runs_dir(task).trajectories] == ["t0/run_0"]  # a task dir works too
    assert load_run(task, 1).mistake_step is None


def test_runs_loader_skips_broken_runs_by_name(tmp_path: Path) -> None:
    task = tmp_path / "b" / "s" / "t"
    write_run(task, 0, run_events(), success=False)
    write_run(task, 1, [ev("solver", "act", content="no steps")], success=False)
    write_run(task, 2, run_events(), success=False, injected={"agent": "solver", "step": 9})
    (task / "run_3.result.json").write_text("{oops", encoding="utf-8")
    res = load_runs_dir(tmp_path)
    assert [t.id for t in res.trajectories] == ["b/s/t/run_0"]
    reasons = {Path(s.path).name: s.reason for s in res.skipped}
    assert set(reasons) == {"run_1.result.json", "run_2.result.json", "run_3.result.json"}
    assert "no event has an integer payload.step_index" in reasons["run_1.result.json"]
    assert "injected_error.step" in reasons["run_2.result.json"]


# ---------------------------------------------------------------- random + metrics


def small_traj(tid: str = "x", n: int = 6) -> Trajectory:
    agents = ["A", "B (thought)", "b", "C"]
    steps = [Step(index=i, agent=agents[i % 4], content=f"s{i}") for i in range(n)]
    return Trajectory(id=tid, subset="t", query="q", steps=steps, mistake_agent="B", mistake_step=2)


async def test_random_is_seeded_and_in_range() -> None:
    method = get_method("random")
    t = small_traj(n=7)
    a = [await method(t, MethodContext(seed=s)) for s in range(40)]
    assert all(0 <= p.step < 7 and normalize_agent(p.agent) in {"a", "b", "c"} for p in a)
    assert len({p.step for p in a}) > 3
    again = await method(t, MethodContext(seed=3))
    assert again == a[3] and a[3].confidence == pytest.approx(1 / 3)


async def test_llm_method_without_model_is_a_user_error() -> None:
    if "all_at_once" not in METHODS:
        pytest.skip("LLM methods not present")
    with pytest.raises(UserError, match="--model"):
        await get_method("all_at_once")(small_traj(), MethodContext())


def rec(tid: str, subset: str, pa: str | None, ps: int | None, ga: str, gs: int, tokens: int = 10) -> CaseRecord:
    return CaseRecord(id=tid, subset=subset, predicted_agent=pa, predicted_step=ps, confidence=0.5, tokens=tokens,
                      seconds=1.0, nfe=1, truncated=False, gold_agent=ga, gold_step=gs, n_steps=10)


def test_attribution_metrics_per_subset() -> None:
    assert agent_correct("WebSurfer", "websurfer") and not agent_correct(None, "x")
    assert step_within(3, 5, 2) and not step_within(3, 6, 2) and not step_within(None, 1, 5)
    records = [
        rec("1", "a", "Web (x)", 4, "web", 4, tokens=10),
        rec("2", "a", "other", 6, "web", 4, tokens=30),
        rec("3", "b", None, None, "Orch", 0),
    ]
    m = attribution_metrics(records)
    assert m["a"]["agent_accuracy"] == 0.5 and m["a"]["step_accuracy"] == 0.5
    assert m["a"]["step_accuracy_within"]["1"] == 0.5 and m["a"]["step_accuracy_within"]["2"] == 1.0
    assert m["a"]["mean_tokens"] == 20.0 and m["b"]["n_no_step"] == 1
    assert m["all"]["n"] == 3 and m["all"]["agent_accuracy"] == pytest.approx(1 / 3)
    from descriptor.stats import wilson_interval  # each labelled case one trial, with its sampling error

    assert m["all"]["agent_accuracy_ci"] == list(wilson_interval(1, 3)) and m["all"]["n_agent_labelled"] == 3
    assert m["a"]["step_accuracy_ci"] == list(wilson_interval(1, 2))


# ---------------------------------------------------------------- CLI end to end


@needs_dev
def test_cli_attribute_random_on_dev(tmp_path: Path) -> None:
    out = tmp_path / "rand"
    argv = ["attribute", "--data-dir", str(DEV), "--method", "random", "--out", str(out), "--seed", "1"]
    assert main.main(argv) == 0
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(lines) == 123
    keys = {"id", "subset", "predicted_agent", "predicted_step", "confidence", "tokens", "seconds", "truncated",
            "gold_agent", "gold_step"}
    assert keys <= set(lines[0])
    assert all(isinstance(x["gold_step"], int) and isinstance(x["predicted_step"], int) for x in lines)
    res = json.loads((out / "results.json").read_text())
    assert set(res["metrics"]) == {"all", "algorithm_generated", "hand_crafted"}
    m = res["metrics"]["algorithm_generated"]
    assert m["n"] == 84 and 0.0 < m["agent_accuracy"] < 0.7
    assert set(m["step_accuracy_within"]) == {"1", "2", "3", "4", "5"}
    assert m["step_accuracy"] <= m["step_accuracy_within"]["1"] <= m["step_accuracy_within"]["5"]
    assert main.main([*argv[:-4], "--out", str(tmp_path / "r2"), "--seed", "1", "--max-cases", "5",
                      "--subset", "hand_crafted"]) == 0
    assert len((tmp_path / "r2" / "predictions.jsonl").read_text().splitlines()) == 5


def _counting_method(monkeypatch: pytest.MonkeyPatch, calls: list[str], fail: set[str] = frozenset()) -> None:
    """Register ``counting``: random's answer, recording which cases it was asked (and failing on ``fail``)."""
    from attribution.methods.base import METHODS

    def factory():
        inner = get_method("random")

        async def run(t: Trajectory, ctx: MethodContext):
            calls.append(t.id)
            if t.id in fail:
                raise RuntimeError("transient")
            return await inner(t, ctx)
        return run

    METHODS.unregister("counting")  # a test may swap it for one failing other cases
    METHODS.register("counting", factory)


@pytest.fixture(autouse=True)
def _no_counting_method_left() -> Iterator[None]:
    yield
    METHODS.unregister("counting")


def test_attribute_resumes_without_redoing_finished_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attribution.jobs import PARTIAL, AttributeJob, run_attribute_job

    for i in range(5):
        write_wnw(tmp_path / "ww", "algorithm_generated", f"{i}", ag_record(str(i % 4)))
    calls: list[str] = []
    _counting_method(monkeypatch, calls, fail={"algorithm_generated/1"})
    out = tmp_path / "out"
    job = AttributeJob(data_dir=str(tmp_path / "ww"), method="counting", out=str(out), max_cases=3, concurrency=1)
    first = run_attribute_job(job)
    assert first["n_cases"] == 3 and first["n_resumed"] == 0 and len(calls) == 3
    assert not (out / PARTIAL).exists()
    before = {json.loads(x)["id"]: x for x in (out / "predictions.jsonl").read_text().splitlines()}

    # A larger --max-cases runs only the new cases and the one that failed.
    calls.clear()
    _counting_method(monkeypatch, calls)
    second = run_attribute_job(job.model_copy(update={"max_cases": 5}))
    assert sorted(calls) == ["algorithm_generated/1", "algorithm_generated/3", "algorithm_generated/4"]
    assert second["n_cases"] == 5 and second["n_resumed"] == 2
    after = {json.loads(x)["id"]: x for x in (out / "predictions.jsonl").read_text().splitlines()}
    assert list(after) == [f"algorithm_generated/{i}" for i in range(5)]  # input order
    assert all(after[k] == before[k] for k in before if k != "algorithm_generated/1")  # kept byte for byte
    assert json.loads(after["algorithm_generated/1"])["error"] is None


def test_attribute_resumes_from_the_partial_file_of_a_crashed_run(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from attribution.jobs import PARTIAL, AttributeJob, run_attribute_job

    for i in range(4):
        write_wnw(tmp_path / "ww", "algorithm_generated", f"{i}", ag_record())
    calls: list[str] = []
    _counting_method(monkeypatch, calls)
    out = tmp_path / "out"
    job = AttributeJob(data_dir=str(tmp_path / "ww"), method="counting", out=str(out), concurrency=1)
    run_attribute_job(job)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    # What a run killed after two cases leaves: settings.json, two finished lines and a torn third.
    (out / "predictions.jsonl").unlink()
    (out / "results.json").unlink()
    (out / PARTIAL).write_text(lines[2] + "\n" + lines[0] + "\n" + lines[1][:25], encoding="utf-8")
    calls.clear()
    res = run_attribute_job(job)
    assert sorted(calls) == ["algorithm_generated/1", "algorithm_generated/3"]
    again = (out / "predictions.jsonl").read_text().splitlines()
    assert res["n_resumed"] == 2 and [again[0], again[2]] == [lines[0], lines[2]]  # kept byte for byte
    assert [json.loads(x)["id"] for x in again] == [json.loads(x)["id"] for x in lines]


def test_attribute_refuses_to_mix_settings_in_one_out_dir(tmp_path: Path) -> None:
    from attribution.jobs import AttributeJob, run_attribute_job

    write_wnw(tmp_path / "ww", "algorithm_generated", "0", ag_record())
    job = AttributeJob(data_dir=str(tmp_path / "ww"), method="random", out=str(tmp_path / "out"), seed=1)
    run_attribute_job(job)
    with pytest.raises(UserError, match="seed=1.*seed=2"):
        run_attribute_job(job.model_copy(update={"seed": 2}))
    with pytest.raises(UserError, match="with_ground_truth"):
        run_attribute_job(job.model_copy(update={"with_ground_truth": False}))


def test_a_failed_first_attempt_does_not_bind_the_out_dir(tmp_path: Path) -> None:
    from attribution.jobs import AttributeJob, run_attribute_job

    write_wnw(tmp_path / "ww", "algorithm_generated", "0", ag_record())
    job = AttributeJob(data_dir=str(tmp_path / "ww"), method="all_at_once", out=str(tmp_path / "out"))
    with pytest.raises(UserError, match="model"):  # forgot --model: stops before any case finishes
        run_attribute_job(job)
    # the same --out with the model given (here the scripted one) then just runs
    res = run_attribute_job(job.model_copy(update={"model": "scripted"}))
    assert res["n_cases"] == 1 and res["route"] == "scripted"


def test_score_steps_with_a_model_resumes_without_rescoring(tmp_path: Path) -> None:
    from attribution.jobs import ScoreJob, run_score_job

    for i in range(4):
        write_wnw(tmp_path / "ww", "algorithm_generated", f"{i}", ag_record(str(i % 4)))
    out = tmp_path / "s.jsonl"
    job = ScoreJob(data_dir=str(tmp_path / "ww"), scorer="llm_naive", model="scripted", out=str(out), max_cases=2)
    assert run_score_job(job)["n_resumed"] == 0
    first = out.read_text().splitlines()
    assert not Path(f"{out}.partial.jsonl").exists()
    # a run killed after one more trajectory left its line (and a torn one) in the partial file
    more = run_score_job(job.model_copy(update={"max_cases": 3, "out": str(tmp_path / "t.jsonl")}))
    third = (tmp_path / "t.jsonl").read_text().splitlines()[2]
    Path(f"{out}.partial.jsonl").write_text(third + "\n" + third[:30], encoding="utf-8")
    res = run_score_job(job.model_copy(update={"max_cases": 4}))
    lines = out.read_text().splitlines()
    assert res["n_resumed"] == 3 and more["n_resumed"] == 0 and len(lines) == 4
    assert lines[:2] == first and lines[2] == third  # kept rows are not rescored (same seconds)
    with pytest.raises(UserError, match="with_ground_truth"):
        run_score_job(job.model_copy(update={"with_ground_truth": False}))


@needs_dev
def test_cli_score_steps_position_on_dev(tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    assert main.main(["score-steps", "--data-dir", str(DEV), "--scorer", "position", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 123 and len({r["id"] for r in rows}) == 123
    for r in rows:
        assert {"id", "n_steps", "step_scores", "mistake_step", "mistake_agent", "nfe"} <= set(r)
        assert len(r["step_scores"]) == r["n_steps"] and all(0.0 <= s <= 1.0 for s in r["step_scores"])
        assert isinstance(r["mistake_step"], int) and r["nfe"] == 0 and max(r["step_scores"]) == 1.0
    metrics = json.loads(Path(f"{out}.metrics.json").read_text())["metrics"]
    assert 0.5 < metrics["algorithm_generated"]["auroc"] <= 1.0


def test_cli_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_wnw(tmp_path, "algorithm_generated", "1", ag_record())
    assert main.main(["attribute", "--data-dir", str(tmp_path / "missing"), "--method", "random",
                      "--out", str(tmp_path / "o")]) == 2
    assert "data directory not found" in capsys.readouterr().err
    assert main.main(["attribute", "--data-dir", str(tmp_path), "--method", "random", "--max-cases", "0",
                      "--out", str(tmp_path / "o")]) == 2
    assert "--max-cases" in capsys.readouterr().err
    if "all_at_once" in METHODS:
        assert main.main(["attribute", "--data-dir", str(tmp_path), "--method", "all_at_once",
                          "--out", str(tmp_path / "o")]) == 2
        assert "--model" in capsys.readouterr().err


def test_a_job_that_finishes_no_case_leaves_no_file(tmp_path: Path) -> None:
    from attribution.jobs import AttributeJob, ScoreJob, run_attribute_job, run_score_job

    write_wnw(tmp_path / "ww", "algorithm_generated", "0", ag_record())
    with pytest.raises(UserError, match="model"):
        run_attribute_job(AttributeJob(data_dir=str(tmp_path / "ww"), method="all_at_once", out=str(tmp_path / "a")))
    with pytest.raises(UserError, match="model"):
        run_score_job(ScoreJob(data_dir=str(tmp_path / "ww"), scorer="llm_naive", out=str(tmp_path / "s.jsonl")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ww"]  # no settings, no empty partial file
