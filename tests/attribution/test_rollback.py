"""Rollback: fork a failed scripted run from a top-level checkpoint and resume it."""

import asyncio
import hashlib
import json

import langgraph
import pytest

from attribution.conformal import Calibration
from attribution.sources.loaders import load_run
from attribution.rollback.restart import NOTE_OPENING, choose_restart, rollback_one, superstep_start
from attribution.rollback.experiment import resolve_scoring, training_for
from attribution.sources.scorefile import ScoreRecord, TrainSource
from attribution.sources.trajectory import Step, Trajectory
from main import main
from descriptor.errors import UserError
from mas.sweep.checkpoints import read_only_connection

# Verified against this LangGraph minor version: forking a top-level checkpoint re-runs only the
# super-steps after it. Subgraph time travel re-runs whole subgraphs, so rollback never uses it.
PINNED_LANGGRAPH = "1.2"


def _langgraph_version() -> str:
    from importlib.metadata import version

    return version("langgraph")


def test_langgraph_version_is_the_pinned_one():
    assert _langgraph_version().startswith(PINNED_LANGGRAPH + "."), (
        f"rollback was verified on LangGraph {PINNED_LANGGRAPH}.x, found {_langgraph_version()}: "
        "re-run tests/attribution/test_rollback.py and update PINNED_LANGGRAPH")
    assert langgraph is not None


def scripted_run(tmp_path, system, inject=None, *, model="scripted", extra=""):
    """Task dir of one scripted arith run of ``system`` (``inject``: {"agent", "step"} of a wrong step; ``extra``:
    more TOML tables for the config)."""
    cfg = tmp_path / "cfg.toml"
    text = f'[models.default]\nprovider = "scripted"\nmodel = "{model}"\n[storage]\ncheckpoints = "all"\n{extra}'
    if inject:
        text += f'[inject]\nstep = {inject["step"]}\nagent = "{inject["agent"]}"\n'
    cfg.write_text(text)
    assert main(["run", "--config", str(cfg), "--benchmark", "arith", "--task-limit", "1", "--systems", system,
                 "--output-root", str(tmp_path), "--experiment-id", "e"]) == 0
    return next(p for p in (tmp_path / "e" / "arith" / system).iterdir() if p.is_dir())


@pytest.fixture
def failed_run(tmp_path):
    """One SAS arith run with a wrong step injected at step 1."""
    return scripted_run(tmp_path, "sas", {"agent": "solver", "step": 1})


def _hashes(task_dir):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in task_dir.glob("run_0.*")}


@pytest.mark.parametrize("system", ["sas", "supervisor", "debate", "orchestrator"])
def test_state_ids_are_top_level_checkpoints(tmp_path, system):
    task_dir = scripted_run(tmp_path, system)
    traj = load_run(task_dir, 0)
    con = read_only_connection(task_dir / "run_0.checkpoints.sqlite.gz")
    rows = dict(con.execute("select checkpoint_id, checkpoint_ns from checkpoints").fetchall())
    con.close()
    assert traj.steps and all(s.state_id in rows for s in traj.steps)
    assert all(rows[s.state_id] == "" for s in traj.steps)  # never a subgraph's checkpoint


async def test_rollback_before_the_injected_step_restores_success(failed_run):
    traj = load_run(failed_run, 0)
    assert traj.mistake_step == 1 and json.loads((failed_run / "run_0.result.json").read_text())["success"] is False
    before = _hashes(failed_run)
    scores = ScoreRecord(id=traj.id, n_steps=traj.n_steps,
                         step_scores=[1.0 if i == 1 else 0.1 for i in range(traj.n_steps)], mistake_step=1)
    rec = await rollback_one(traj, strategy="top1", scores=scores, calibration=None)
    assert rec.restart_step == 1 and rec.chosen_step == 1 and rec.success and rec.covered and not rec.fallback
    assert rec.cost == pytest.approx((traj.n_steps - 1) / traj.n_steps)
    # only the steps after the fork were redone, numbered as in the original run
    events = [json.loads(x) for x in (failed_run / "run_0.rollback_0.trace.jsonl").read_text().splitlines()]
    redone = [e["payload"]["step_index"] for e in events if "step_index" in e["payload"]]
    assert redone == list(range(1, traj.n_steps))
    assert rec.steps_redone == traj.n_steps - 1
    after = _hashes(failed_run)
    assert {k: after[k] for k in before} == before  # the original run's files are untouched


async def test_rollback_after_the_injected_step_keeps_the_error(failed_run):
    traj = load_run(failed_run, 0)
    scores = ScoreRecord(id=traj.id, n_steps=traj.n_steps,
                         step_scores=[1.0 if i == 2 else 0.0 for i in range(traj.n_steps)], mistake_step=1)
    rec = await rollback_one(traj, strategy="top1", scores=scores, calibration=None)
    assert rec.restart_step == 2 and not rec.covered and not rec.success


async def test_full_restart_redoes_everything(failed_run):
    rec = await rollback_one(load_run(failed_run, 0), strategy="restart", scores=None, calibration=None)
    assert rec.restart_step == 0 and rec.cost == 1.0 and rec.success


@pytest.fixture
def failed_run_with_inputs(tmp_path):
    """``failed_run`` recording each model call's input messages."""
    return scripted_run(tmp_path, "sas", {"agent": "solver", "step": 1}, extra="[tracing]\nrecord_inputs = true\n")


def _told(task_dir, k):
    """The input messages of rollback ``k``'s model calls, joined."""
    lines = [json.loads(x) for x in (task_dir / f"run_0.rollback_{k}.trace.jsonl").read_text().splitlines()]
    return " ".join(m["content"] for e in lines for m in e["payload"].get("input_messages") or ())


async def test_a_retry_reruns_the_whole_run_without_the_note(failed_run_with_inputs):
    traj = load_run(failed_run_with_inputs, 0)
    restart = await rollback_one(traj, strategy="restart", scores=None, calibration=None)
    retry = await rollback_one(traj, strategy="retry", scores=None, calibration=None)
    for rec in (restart, retry):
        assert rec.restart_step == 0 and rec.cost == 1.0 and rec.set == list(range(traj.n_steps)) and rec.success
    note = NOTE_OPENING
    assert note in _told(failed_run_with_inputs, restart.rollback_index)
    told = _told(failed_run_with_inputs, retry.rollback_index)
    assert told and note not in told and "judged wrong" not in told


async def test_each_rollback_of_a_run_draws_with_a_seed_of_its_own(failed_run, monkeypatch):
    """A resumed part that kept the failed run's seed drew with the failure's random numbers."""
    import mas.sweep.runner as runner

    seeds, make = [], runner.run_context
    monkeypatch.setattr(runner, "run_context", lambda *a, **kw: seeds.append(kw["seed"]) or make(*a, **kw))
    run_seed = json.loads((failed_run / "run_0.metadata.json").read_text())["seed"]
    for _ in range(2):
        await rollback_one(load_run(failed_run, 0), strategy="restart", scores=None, calibration=None)
    assert seeds == [runner.rollback_seed(run_seed, 0), runner.rollback_seed(run_seed, 1)]
    assert len({run_seed, *seeds}) == 3


@pytest.fixture
def judged_run(tmp_path):
    """One debate arith run whose final vote a judge model (the scripted double's judge variant) cast."""
    return scripted_run(tmp_path, "debate", model="scripted:judge", extra="[tracing]\nrecord_inputs = true\n")


async def test_a_judges_vote_is_a_step_and_a_rollback_redoes_it_alone(judged_run):
    task_dir = judged_run
    traj = load_run(task_dir, 0)
    vote = traj.steps[-1]
    assert (vote.agent, vote.kind) == ("system:judge", "verify") and vote.state_id is not None
    assert [s.agent for s in traj.steps[:-1]] and "system:judge" not in {s.agent for s in traj.steps[:-1]}
    n = traj.n_steps
    scores = ScoreRecord(id=traj.id, n_steps=n, step_scores=[0.1] * (n - 1) + [1.0])
    rec = await rollback_one(traj, strategy="top1", scores=scores, calibration=None)
    assert rec.restart_step == n - 1 and rec.steps_redone == 1 and rec.status == "finished" and rec.success
    lines = [json.loads(x) for x in (task_dir / "run_0.rollback_0.trace.jsonl").read_text().splitlines()]
    steps = [e for e in lines if e["payload"].get("step_index") is not None]
    assert [(e["actor"], e["payload"]["step_index"], e["payload"]["redo"]) for e in steps] == [
        ("system:judge", n - 1, True)]
    told = " ".join(m["content"] for m in steps[0]["payload"]["input_messages"])
    assert NOTE_OPENING in told  # the judge read the rollback note


@pytest.mark.parametrize("system", ["debate", "sas_matched", "representative_exchange"])
def test_a_judges_vote_is_the_last_step_of_every_voting_topology(tmp_path, system):
    task_dir = scripted_run(tmp_path, system, model="scripted:judge")
    events = [json.loads(x) for x in (task_dir / "run_0.trace.jsonl").read_text().splitlines()]
    steps = [(e["actor"], e["payload"]["step_index"]) for e in events if e["payload"].get("step_index") is not None]
    assert [i for _, i in steps] == list(range(len(steps)))  # numbered on from the agents' steps
    assert steps[-1][0] == "system:judge" and [a for a, _ in steps].count("system:judge") == 1


def test_a_lexical_vote_is_no_step(tmp_path):
    # mock mode: no judge model is called, and the vote is a function of the debaters' steps
    traj = load_run(scripted_run(tmp_path, "debate"), 0)
    assert traj.steps and "system:judge" not in {s.agent for s in traj.steps}


def test_choose_restart_strategies():
    s = ScoreRecord(id="x", n_steps=4, step_scores=[0.1, 0.9, 0.9, 0.2])
    top1 = choose_restart("top1", s, None)
    assert (top1.members, top1.step, top1.fallback) == ([1], 1, False)  # ties go to the earliest step
    restart = choose_restart("restart", s, None)
    assert (restart.members, restart.step) == ([0, 1, 2, 3], 0)
    with pytest.raises(Exception, match="calibration"):
        choose_restart("conformal", s, None)


def calibration(q_hat, method="vcp", **scorer):
    return Calibration(method=method, resolved_method=method, aggregator="sum", lam=1.0, beta=10.0, alpha=0.2,
                       q_hat=q_hat, n=10, n_skipped=0, seed=0, fingerprint="sha256:0", scores_path="s.jsonl",
                       **scorer)


def test_an_empty_conformal_set_is_kept_and_the_substitute_flagged():
    s = ScoreRecord(id="x", n_steps=4, step_scores=[0.5] * 4, mistake_step=1)
    choice = choose_restart("conformal", s, calibration(0.0))  # vcp: 1 - 0.5 > 0 for every step
    assert choice.members == [] and choice.fallback and choice.step == 3


async def test_rollback_with_an_empty_set_records_the_true_set(failed_run):
    traj = load_run(failed_run, 0)
    scores = ScoreRecord(id=traj.id, n_steps=traj.n_steps, step_scores=[0.5] * traj.n_steps, mistake_step=1)
    rec = await rollback_one(traj, strategy="conformal", scores=scores, calibration=calibration(0.0))
    assert rec.set == [] and rec.fallback and rec.chosen_step == traj.n_steps - 1
    assert rec.restart_step == traj.n_steps - 1 and rec.covered is False and not rec.success


def _traj(state_ids):
    return Trajectory(id="t", query="q", steps=[Step(index=i, agent="a", state_id=sid)
                                                 for i, sid in enumerate(state_ids)])


def test_superstep_start_is_the_first_step_sharing_the_checkpoint():
    t = _traj(["a", "b", "b", "b", "c", None])
    assert [superstep_start(t, j) for j in range(6)] == [0, 1, 1, 1, 4, 5]


@pytest.mark.parametrize("system, inject, later_sibling", [
    ("orchestrator", {"agent": "worker_1", "step": 2}, "worker_2"),
    ("debate", {"agent": "debater_1", "step": 12}, "debater_2"),
])
def test_restart_at_a_later_parallel_sibling_redoes_the_whole_superstep(tmp_path, system, inject, later_sibling):
    task_dir = scripted_run(tmp_path, system, inject)  # `main run` starts its own event loop: a sync test
    traj = load_run(task_dir, 0)
    # the last step of a fanned-out super-step, taken by a later sibling than the first step's agent
    j = max(s.index for s in traj.steps if s.agent == later_sibling
            and sum(x.state_id == s.state_id for x in traj.steps) > 1)
    first = superstep_start(traj, j)
    siblings = {s.agent for s in traj.steps if s.state_id == traj.steps[j].state_id}
    assert first < j and len(siblings) > 1
    scores = ScoreRecord(id=traj.id, n_steps=traj.n_steps,
                         step_scores=[1.0 if i == j else 0.0 for i in range(traj.n_steps)])
    rec = asyncio.run(rollback_one(traj, strategy="top1", scores=scores, calibration=None))
    assert rec.chosen_step == j and rec.set == [j] and rec.restart_step == first
    assert rec.cost == pytest.approx((traj.n_steps - first) / traj.n_steps)
    events = [json.loads(x) for x in (task_dir / "run_0.rollback_0.trace.jsonl").read_text().splitlines()]
    redone = [e["payload"]["step_index"] for e in events if "step_index" in e["payload"]]
    assert redone[0] == first and redone == list(range(first, first + len(redone)))


# --- which scorer rollback uses ---------------------------------------------------


def test_rollback_defaults_to_the_calibrations_scorer_and_training_data(tmp_path):
    src = TrainSource(runs_dir=str(tmp_path / "cal"))
    cal = calibration(0.5, method="rf", scorer="learned", scorer_train=src)
    setup = resolve_scoring(cal)
    assert setup.scorer == "learned" and setup.train == src and not setup.with_ground_truth
    with pytest.raises(UserError, match="'learned' scorer; scoring with 'position' would void"):
        resolve_scoring(cal, scorer="position")
    # the calibration is not used by top1, so another scorer is allowed (with its own training data)
    other = resolve_scoring(cal, scorer="position", train_dir=tmp_path, uses_calibration=False)
    assert other.scorer == "position" and other.train == TrainSource(train_dir=str(tmp_path.resolve()))


def test_a_calibration_without_a_recorded_scorer_says_what_to_pass():
    with pytest.raises(UserError, match="pass --train-dir DIR"):
        resolve_scoring(calibration(0.5))
    assert resolve_scoring(calibration(0.5), train_dir="runs").train.train_dir.endswith("runs")


def test_training_runs_of_the_targets_question_are_left_out():
    def t(i, q, mistake=0):
        return Trajectory(id=f"r{i}", query=q, steps=[Step(index=0, agent="a")], mistake_step=mistake)

    targets = [t(0, "q1")]
    assert [x.id for x in training_for(targets, [t(1, "q1"), t(2, "q2"), t(3, "q3", None)])] == ["r2"]
    with pytest.raises(UserError, match="outside the question"):
        training_for(targets, [t(1, "q1")])


def test_rollback_with_an_llm_scorer_on_a_model_route(failed_run, capsys):
    run = str(failed_run / "run_0")
    assert main(["rollback", "--run-dir", run, "--strategy", "top1", "--scorer", "llm_naive",
                 "--model", "scripted", "--with-ground-truth"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["strategy"] == "top1" and rec["scoring_nfe"] > 0 and len(rec["set"]) == 1


def test_conformal_rollback_with_an_llm_scorer_stops_scoring_early(failed_run, tmp_path, capsys):
    traj = load_run(failed_run, 0)
    cal = calibration(0.0001, method="lf", scorer="llm_naive", scorer_route="scripted",
                      scorer_with_ground_truth=True)
    path = tmp_path / "cal.json"
    path.write_text(cal.model_dump_json(), encoding="utf-8")
    assert main(["rollback", "--run-dir", str(failed_run / "run_0"), "--strategy", "conformal",
                 "--calibration", str(path)]) == 0
    rec = json.loads(capsys.readouterr().out)
    # A tiny q_hat: the scan crosses it within the first steps it scores, far short of every step.
    assert 1 <= rec["scoring_nfe"] < traj.n_steps - 1
    assert rec["set"] == list(range(traj.n_steps - len(rec["set"]), traj.n_steps))  # a suffix (lf)


def test_llm_scorer_settings_default_to_the_calibrations_route_without_ground_truth():
    cal = calibration(0.5, scorer="llm_naive", scorer_route="scripted", scorer_with_ground_truth=False)
    setup = resolve_scoring(cal)
    assert (setup.scorer, setup.route, setup.with_ground_truth, setup.train) == ("llm_naive", "scripted", False, None)
    assert resolve_scoring(cal, model="other", with_ground_truth=True).route == "other"  # allowed, logged


@pytest.mark.parametrize(("policy", "kept"), [("failed", {"sas": False, "sas_failed": True}),
                                              ("all", {"sas": True, "sas_failed": True}),
                                              ("none", {"sas": False, "sas_failed": False})])
def test_checkpoints_are_kept_by_policy(tmp_path, policy, kept):
    """Checkpoints exist for rollback: by default only a run that failed keeps them."""
    for name, inject in (("sas", ""), ("sas_failed", '[inject]\nstep = 1\nagent = "solver"\n')):
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(f'[models.default]\nprovider = "scripted"\nmodel = "scripted"\n[storage]\n'
                       f'checkpoints = "{policy}"\n{inject}')
        assert main(["run", "--config", str(cfg), "--benchmark", "arith", "--task-limit", "1", "--systems", "sas",
                     "--output-root", str(tmp_path / name), "--experiment-id", "e"]) == 0
        task_dir = next(p for p in (tmp_path / name / "e" / "arith" / "sas").iterdir() if p.is_dir())
        meta = json.loads((task_dir / "run_0.metadata.json").read_text())
        db = task_dir / "run_0.checkpoints.sqlite.gz"  # kept databases are gzipped
        assert db.exists() is kept[name] and (meta["checkpoint_db"] == db.name) is kept[name]
        assert not list(task_dir.glob("*.sqlite")) and not list(task_dir.glob("*.sqlite-*"))  # no plain copy, no WAL
        if kept[name]:
            traj = load_run(task_dir, 0)
            con = read_only_connection(db)
            ids = {r[0] for r in con.execute("select checkpoint_id from checkpoints")}
            con.close()
            assert all(s.state_id in ids for s in traj.steps)  # a kept database is complete after compaction


async def test_a_rollback_with_no_note_tells_the_resumed_agents_nothing(failed_run_with_inputs):
    traj = load_run(failed_run_with_inputs, 0)
    told = await rollback_one(traj, strategy="top1", scores=None, calibration=None, choice=choose_restart(
        "oracle", None, None, traj.n_steps - 1))
    quiet = await rollback_one(traj, strategy="top1", scores=None, calibration=None, note=False, choice=choose_restart(
        "oracle", None, None, traj.n_steps - 1))
    assert (told.note, quiet.note, told.restart_step) == (True, False, quiet.restart_step)
    note = NOTE_OPENING
    assert note in _told(failed_run_with_inputs, told.rollback_index)
    said = _told(failed_run_with_inputs, quiet.rollback_index)
    assert said and note not in said and "judged wrong" not in said
    retry = await rollback_one(traj, strategy="retry", scores=None, calibration=None)
    assert retry.note is False
