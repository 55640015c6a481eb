"""label-failures: a failed run's decisive step by counterfactual replay from its checkpoints, and its use by
score-steps and calibrate."""

import asyncio
import json
import math

import pytest

from attribution.rollback import labels as labels_mod
from attribution.rollback.labels import label_failure, restart_points
from attribution.sources.labelfile import Probe, apply_labels, read_labels
from attribution.sources.trajectory import Step, Trajectory
from descriptor.errors import UserError
from descriptor.records import RollbackRecord
from mas.sweep.runner import rollback_seed
from main import main


@pytest.fixture(scope="module")
def injected_sweep(tmp_path_factory):
    """Three scripted sas runs on arith, each with one injected wrong step (uniform position)."""
    root = tmp_path_factory.mktemp("labels")
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--inject-position", "uniform", "--task-limit", "3", "--seed", "3", "--output-root", str(root),
                 "--experiment-id", "e", "--progress", "none"]) == 0
    return root / "e"


@pytest.fixture(scope="module")
def labelled(injected_sweep):
    out = injected_sweep.parent / "labels.jsonl"
    assert main(["label-failures", "--experiment-root", str(injected_sweep), "--out", str(out)]) == 0
    return out


@pytest.mark.slow  # a scripted sweep and its labelling: ~40 s on a loaded machine
def test_the_label_is_the_injected_step_within_the_bisection_budget(labelled):
    lines = [json.loads(x) for x in labelled.read_text().splitlines()]
    assert len(lines) == 3
    for lab in lines:
        assert lab["status"] == "labelled" and lab["decisive_step"] == lab["injected_step"]
        assert lab["decisive_agent"] == "solver"
        assert lab["flip_probability"] == 1.0 and lab["flip_ci"][1] == 1.0 and lab["flip_ci"][0] < 1.0
        assert lab["replays"] <= 2 * math.log2(lab["n_steps"]) + 2
        assert lab["replays"] == len(lab["probes"]) and lab["tokens"] == sum(p["tokens"] for p in lab["probes"]) > 0
        # the bisection's evidence: the decisive point flips, the next restart point (if probed) does not
        flips = {p["step"]: p["successes"] > 0 for p in lab["probes"]}
        assert flips[lab["decisive_step"]] and not any(f for s, f in flips.items() if s > lab["decisive_step"])


@pytest.mark.slow  # a scripted sweep and its labelling: ~40 s on a loaded machine
def test_replays_are_kept_as_label_rollbacks_that_the_sweep_summaries_ignore(labelled, injected_sweep):
    from descriptor.layout import RunPaths
    from descriptor.rollback_summary import sweep_rollback

    run = RunPaths(next(p.parent for p in injected_sweep.rglob("run_0.result.json")), 0)
    recs = [RollbackRecord.model_validate_json(run.for_rollback(k).rollback_record.read_text())
            for k in run.rollbacks()]
    assert recs and all(r.origin == "label" and r.strategy == "label" for r in recs)
    assert sweep_rollback(run) is None


@pytest.mark.slow  # a scripted sweep and its labelling: ~40 s on a loaded machine
def test_score_steps_and_calibrate_take_the_labels_in_place_of_the_injected_steps(labelled, injected_sweep, tmp_path):
    labs = read_labels(labelled)
    first, second, third = sorted(labs)
    # move one label, and leave another run unlabelled: the labels, not the injection, must reach the records
    moved = labs[first].model_copy(update={"decisive_step": 0, "decisive_agent": "moved"})
    unlabelled = labs[second].model_copy(update={"status": "unrepairable", "decisive_step": None})
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(x.model_dump_json() + "\n" for x in (moved, unlabelled, labs[third])))
    scores = tmp_path / "scores.jsonl"
    assert main(["score-steps", "--runs-dir", str(injected_sweep), "--labels", str(path), "--scorer", "position",
                 "--out", str(scores)]) == 0
    rows = {r["id"]: r for r in map(json.loads, scores.read_text().splitlines())}
    assert rows[first]["mistake_step"] == 0 and rows[first]["mistake_agent"] == "moved"
    assert rows[second]["mistake_step"] is None
    assert rows[third]["mistake_step"] == labs[third].decisive_step
    assert rows[first]["scorer_train"]["labels"] == str(path.resolve())  # a rollback retrains on the same labels

    # calibrate --labels relabels a score file made without them
    plain = tmp_path / "plain.jsonl"
    assert main(["score-steps", "--runs-dir", str(injected_sweep), "--scorer", "position", "--out", str(plain)]) == 0
    cal = tmp_path / "cal.json"
    assert main(["calibrate", "--scores", str(plain), "--labels", str(path), "--method", "rf", "--alpha", "0.5",
                 "--out", str(cal)]) == 0
    c = json.loads(cal.read_text())
    assert c["n"] + c["n_selection"] == 2 and c["n_skipped"] == 1 and c["labels_path"] == str(path.resolve())


@pytest.mark.slow  # the module's scripted sweep and its labelling
def test_a_rollback_without_the_note_warns_that_its_calibrations_labels_were_made_with_it(labelled, injected_sweep,
                                                                                         tmp_path, capsys):
    scores, cal = tmp_path / "scores.jsonl", tmp_path / "cal.json"
    assert main(["score-steps", "--runs-dir", str(injected_sweep), "--labels", str(labelled), "--scorer", "position",
                 "--out", str(scores)]) == 0
    assert main(["calibrate", "--scores", str(scores), "--labels", str(labelled), "--method", "rf", "--alpha", "0.5",
                 "--out", str(cal)]) == 0
    capsys.readouterr()
    (tmp_path / "file").write_text("")
    argv = ["rollback-experiment", "--experiment-root", str(injected_sweep), "--calibration", str(cal),
            "--strategies", "conformal", "--out", str(tmp_path / "file")]  # a file as --out: stops before any rollback
    assert main([*argv, "--no-note"]) == 2
    assert "were made with the rollback note" in capsys.readouterr().err
    assert main(argv) == 2
    assert "rollback note" not in capsys.readouterr().err


@pytest.mark.slow  # a scripted sweep and its labelling: ~40 s on a loaded machine
def test_labels_of_other_runs_and_bad_lines_are_refused(labelled, tmp_path, capsys):
    labs = read_labels(labelled)
    rid = next(iter(labs))
    traj = Trajectory(id=rid, query="q", steps=[Step(index=0, agent="a", content="x")])
    with pytest.raises(UserError, match="labels are of other runs"):
        apply_labels([traj], labs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(labelled.read_text() + '{"run_id": "x"}\n')
    scores = tmp_path / "s.jsonl"
    scores.write_text("")
    assert main(["calibrate", "--scores", str(scores), "--labels", str(bad), "--method", "rf", "--alpha", "0.2",
                 "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4" in err and "label-failures" in err
    assert main(["score-steps", "--data-dir", str(tmp_path), "--labels", str(labelled), "--scorer", "position",
                 "--out", str(scores)]) == 2
    assert "--runs-dir" in capsys.readouterr().err


def _traj(n, shared=()):
    """A trajectory of ``n`` steps, each with its own checkpoint except the ``shared`` (step, with_step) pairs."""
    ids = [f"c{i}" for i in range(n)]
    for s, w in shared:
        ids[s] = ids[w]
    return Trajectory(id="t", query="q", source_path="/nowhere/task/run_0.trace.jsonl", steps=[Step(index=i, agent=f"a{i}", content="x", state_id=ids[i])
                                                for i in range(n)])


def _fake_probes(monkeypatch, decisive, calls):
    """Replays that succeed exactly when they restart at or before ``decisive`` (None: never)."""

    async def probe(traj, step, samples, note):
        calls.append(step)
        ok = decisive is not None and step <= decisive
        return Probe(step=step, successes=samples if ok else 0, samples=samples, tokens=10 * samples)

    monkeypatch.setattr(labels_mod, "_probe", probe)


@pytest.mark.parametrize("n", [1, 2, 5, 16, 40])
def test_bisection_finds_every_decisive_step_in_log_replays(monkeypatch, n):
    for d in range(n):
        calls: list[int] = []
        _fake_probes(monkeypatch, d, calls)
        lab = asyncio.run(label_failure(_traj(n)))
        assert lab.decisive_step == d and lab.decisive_agent == f"a{d}"
        assert lab.replays == len(calls) <= math.ceil(math.log2(n)) + 1 <= 2 * math.log2(max(n, 1)) + 2
        assert len(set(calls)) == len(calls)  # no point probed twice


def test_a_failure_no_restart_repairs_is_unrepairable(monkeypatch):
    calls: list[int] = []
    _fake_probes(monkeypatch, None, calls)
    lab = asyncio.run(label_failure(_traj(8), samples=3))
    assert lab.status == "unrepairable" and lab.decisive_step is None and 0 in calls
    assert lab.flip_probability == 0.0 and lab.replays == 3 * len(calls) and lab.tokens == 30 * len(calls)
    assert apply_labels([_traj(8)], {"t": lab})[0].mistake_step is None


def test_labels_are_restart_points_so_a_superstep_is_labelled_by_its_first_step(monkeypatch):
    traj = _traj(6, shared=[(3, 2)])  # steps 2 and 3 run from one checkpoint: a restart at 3 redoes 2
    assert restart_points(traj) == [0, 1, 2, 4, 5]
    calls: list[int] = []
    _fake_probes(monkeypatch, 3, calls)  # the error is step 3; only a restart at 2 redoes it
    lab = asyncio.run(label_failure(traj))
    assert lab.decisive_step == 2 and lab.candidates == 5 and 3 not in calls


def test_each_sample_of_a_point_replays_with_its_own_seed(monkeypatch):
    seen = []

    async def rollback_one(traj, *, origin, choice, **kw):
        assert "seed" not in kw  # the replay is seeded by its rollback index (rollback_seed), not by the labelling
        seen.append((choice.step, origin))
        return RollbackRecord(run="r", rollback_index=len(seen), strategy="label", set=[choice.step], chosen_step=0,
                              restart_step=choice.step, n_steps=traj.n_steps, cost=0.5, steps_redone=1, tokens=7,
                              success=len(seen) % 2 == 0, answer="", wall_time_s=0.0, origin=origin,
                              decisive_step=None, covered=None)

    monkeypatch.setattr(labels_mod, "rollback_one", rollback_one)
    probe = asyncio.run(labels_mod._probe(_traj(4), 2, 4, True))
    assert probe.samples == 4 and probe.successes == 2 and probe.tokens == 28
    assert seen == [(2, "label")] * 4
    # each replay takes the run's next rollback index, and each index its own seed, none of them the run's
    seeds = {rollback_seed(5, k) for k in range(4)}
    assert len(seeds) == 4 and 5 not in seeds


def test_a_run_whose_replays_all_fail_is_labelled_with_the_first_replays_error(monkeypatch):
    async def rollback_one(traj, *, choice, origin, **kw):
        return RollbackRecord(run="r", rollback_index=1, strategy="label", set=[choice.step], chosen_step=0,
                              restart_step=choice.step, n_steps=traj.n_steps, cost=0.5, steps_redone=0, tokens=0,
                              success=False, answer="", wall_time_s=0.0, origin=origin, decisive_step=None,
                              covered=None, status="error", error="/x/configs/ab.json: config file not found")

    monkeypatch.setattr(labels_mod, "rollback_one", rollback_one)
    monkeypatch.setattr(labels_mod, "earlier_replays", lambda traj, step, note: [])
    lab = asyncio.run(label_failure(_traj(4)))
    assert lab.status == "error"
    assert lab.error == "every replay ended in an error: /x/configs/ab.json: config file not found"
    assert lab.probes[0].error == "/x/configs/ab.json: config file not found"


def test_a_rerun_reads_the_finished_replays_an_interrupted_labelling_left_instead_of_replaying(monkeypatch, tmp_path):
    task = tmp_path / "task"
    task.mkdir()
    traj = _traj(4).model_copy(update={"source_path": str(task / "run_0.trace.jsonl")})

    def record(k, step, *, status="finished", origin="label", success=True, note=None):
        rec = RollbackRecord(run=str(task / "run_0"), rollback_index=k, strategy="label", set=[step], chosen_step=step,
                             restart_step=step, n_steps=4, cost=0.5, steps_redone=1, tokens=100 + k, success=success,
                             answer="", wall_time_s=0.0, origin=origin, status=status, decisive_step=None, covered=None,
                             note=note)
        (task / f"run_0.rollback_{k}.json").write_text(rec.model_dump_json())

    record(0, 2)                     # sample 0 at step 2: finished before the interruption
    record(1, 2, status="error")     # an infrastructure error: replayed again
    record(2, 1)                     # another point
    record(3, 2, origin="sweep")     # a rollback of the sweep, not a label replay
    record(4, 2, note=False)         # a replay without the note answers another question
    seen = []

    async def rollback_one(traj, *, origin, choice, **kw):
        seen.append(kw.get("seed"))
        return RollbackRecord(run="r", rollback_index=9, strategy="label", set=[choice.step], chosen_step=0,
                              restart_step=choice.step, n_steps=4, cost=0.5, steps_redone=1, tokens=7,
                              success=False, answer="", wall_time_s=0.0, origin=origin, decisive_step=None,
                              covered=None)

    monkeypatch.setattr(labels_mod, "rollback_one", rollback_one)
    probe = asyncio.run(labels_mod._probe(traj, 2, 3, True))
    assert seen == [None, None]  # samples 1 and 2 only, each seeded by its rollback index (rollback_seed)
    assert probe.samples == 3 and probe.successes == 1 and probe.tokens == 100 + 7 + 7
    quiet = asyncio.run(labels_mod._probe(traj, 2, 1, False))  # labelling without the note reads only its own
    assert quiet.tokens == 104 and len(seen) == 2


def test_labels_without_the_note_replay_without_it_and_say_so(monkeypatch):
    told = []

    async def rollback_one(traj, *, origin, choice, note, **kw):
        told.append(note)
        return RollbackRecord(run="r", rollback_index=len(told), strategy="label", set=[choice.step], chosen_step=0,
                              restart_step=choice.step, n_steps=traj.n_steps, cost=0.5, steps_redone=1, tokens=7,
                              success=choice.step <= 1, answer="", wall_time_s=0.0, origin=origin,
                              decisive_step=None, covered=None, note=note)

    monkeypatch.setattr(labels_mod, "rollback_one", rollback_one)
    monkeypatch.setattr(labels_mod, "earlier_replays", lambda traj, step, note: [])
    quiet = asyncio.run(label_failure(_traj(6), note=False))
    assert (quiet.status, quiet.decisive_step, quiet.note) == ("labelled", 1, False)
    assert told and not any(told)
    told.clear()
    assert asyncio.run(label_failure(_traj(6))).note is True and all(told)


def test_own_labels_made_the_other_way_about_the_note_are_made_again(monkeypatch, tmp_path):
    from attribution.rollback import selfcal
    from attribution.sources.labelfile import Label

    failed = [_traj(3).model_copy(update={"id": f"t{i}"}) for i in range(2)]

    def label(run_id, note):
        return Label(run_id=run_id, status="labelled", decisive_step=1, decisive_agent="a1", flip_probability=1.0,
                     flip_ci=(0.2, 1.0), replays=2, tokens=50, n_steps=3, candidates=3, samples=1, probes=[],
                     note=note)

    (tmp_path / selfcal.LABELS_NAME).write_text("".join(label(t.id, True).model_dump_json() + "\n" for t in failed))
    asked = []

    async def label_failures(root, *, samples, out, concurrency, note):
        asked.append(note)
        return [label(t.id, note) for t in failed]

    monkeypatch.setattr(labels_mod, "label_failures", label_failures)
    _, tokens = asyncio.run(selfcal.own_labels(tmp_path, failed, 1, 2, note=True))
    assert asked == [] and tokens == 100  # the file's labels were made with the note: reused
    _, tokens = asyncio.run(selfcal.own_labels(tmp_path, failed, 1, 2, note=False))
    assert asked == [False] and tokens == 100


def _self_sweep(root, name, *extra, tasks, seed):
    return main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--inject-position", "uniform", "--task-limit", str(tasks), "--seed", str(seed), "--output-root",
                 str(root), "--experiment-id", name, "--progress", "none", "--rollback", "conformal",
                 "--calibration", "self", *extra])


@pytest.mark.slow  # two scripted sweeps with labelling and rollback: ~2 min on a loaded machine
def test_calibration_self_labels_the_sweeps_failures_by_replay_and_rolls_each_back(tmp_path, labelled):
    assert _self_sweep(tmp_path, "own", "--rollback-scorer", "position", "--rollback-folds", "3", tasks=6,
                       seed=1) == 0
    root = tmp_path / "own"
    rec = json.loads((root / "rollback_sweep.json").read_text())
    assert rec["calibration"] == "self" and rec["labels"] == str((root / "labels.jsonl").resolve())
    assert rec["label_tokens"] > 0 and rec["n_rolled_back"] == rec["n_failed"] == 6
    labs = read_labels(root / "labels.jsonl")
    assert all(lab.decisive_step == lab.injected_step for lab in labs.values())
    origins = [json.loads(p.read_text())["origin"] for p in root.rglob("run_0.rollback_*.json")
               if p.name.count(".") == 2]  # run_0.rollback_<k>.json, not its .eval.json
    assert origins.count("sweep") == 6 and origins.count("label") == sum(lab.replays for lab in labs.values())

    # earlier failures' labels (the module's sweep): a plain split, nothing relabelled here
    assert _self_sweep(tmp_path, "later", "--rollback-labels", str(labelled), "--rollback-scorer", "position",
                       tasks=2, seed=2) == 0
    rec = json.loads((tmp_path / "later" / "rollback_sweep.json").read_text())
    assert rec["labels"] == str(labelled.resolve()) and rec["label_tokens"] == 0 and rec["n_rolled_back"] == 2
    (fold,) = rec["folds"]
    assert fold["fold"] == "earlier" and fold["n_calibration"] + fold["n_selection"] == 3
    assert not (tmp_path / "later" / "labels.jsonl").exists()


@pytest.mark.parametrize("extra, says", [
    (["--rollback-labels", "x.jsonl"], "--rollback-labels: the labels calibrate --calibration self"),
    (["--calibration", "self", "--rollback-labels", "missing.jsonl"], "missing.jsonl: file not found"),
    (["--calibration", "self", "--rollback-label-samples", "0"], "at least 1"),
])
def test_bad_self_calibration_input_is_refused_before_any_run(tmp_path, capsys, extra, says):
    argv = ["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--task-limit", "1",
            "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none", "--rollback", "conformal",
            *extra]
    assert main(argv) == 2
    assert says in capsys.readouterr().err and not (tmp_path / "e" / "arith").exists()


def test_no_rollback_note_without_rollback_is_refused(tmp_path, capsys):
    argv = ["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--task-limit", "1",
            "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none", "--no-rollback-note"]
    assert main(argv) == 2
    assert "--no-rollback-note: only used with --rollback" in capsys.readouterr().err
    assert not (tmp_path / "e" / "arith").exists()


@pytest.mark.parametrize("before, now, refused", [
    (("restart", False), ("restart", True), True),
    (("restart", True), ("restart", False), True),
    (("restart", True), ("restart", True), False),
    (("retry", False), ("retry", True), False),  # retry never tells: --no-rollback-note changes nothing
])
def test_a_sweep_rolled_back_one_way_about_the_note_is_not_resumed_the_other(tmp_path, before, now, refused):
    from attribution.rollback.sweep import SweepRollbackOptions, check_options
    from descriptor.records import RollbackSweepRecord
    from mas.config import ExperimentConfig

    prev = RollbackSweepRecord(strategy=before[0], note=before[1] and before[0] != "retry", n_failed=1,
                               n_rolled_back=1, n_already=0, n_errors=0, n_without_choice=0, wall_time_s=1.0)
    (tmp_path / "rollback_sweep.json").write_text(prev.model_dump_json())
    opts = SweepRollbackOptions(strategy=now[0], note=now[1])
    if refused:
        with pytest.raises(UserError, match="rolled back once"):
            check_options(ExperimentConfig(), opts, tmp_path)
    else:
        check_options(ExperimentConfig(), opts, tmp_path)


def test_labels_name_their_runs_by_absolute_path_when_the_root_was_given_relative(tmp_path, monkeypatch):
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--task-limit", "1", "--output-root", str(tmp_path), "--experiment-id", "e", "--progress",
                 "none"]) == 0
    seen = []

    async def fake(traj, *, samples, note):
        seen.append(traj.source_path)
        from attribution.sources.labelfile import Label
        return Label(run_id=traj.id, run=str(labels_mod.run_of(traj).prefix), status="unrepairable",
                     decisive_step=None, decisive_agent=None, flip_probability=0.0, flip_ci=(0.0, 0.5), replays=1,
                     tokens=1, n_steps=traj.n_steps, candidates=1, samples=samples, probes=[])

    monkeypatch.setattr(labels_mod, "label_failure", fake)
    monkeypatch.chdir(tmp_path)
    [lab] = asyncio.run(labels_mod.label_failures("e", out="labels.jsonl"))
    assert seen[0].startswith(str(tmp_path.resolve())) and lab.run.startswith(str(tmp_path.resolve()))


def _label_file(path, *notes):
    from attribution.sources.labelfile import Label

    path.write_text("".join(Label(
        run_id=f"r{i}", status="labelled", decisive_step=1, decisive_agent="a", flip_probability=1.0,
        flip_ci=(0.2, 1.0), replays=1, tokens=1, n_steps=3, candidates=3, samples=1, probes=[], note=note,
    ).model_dump_json() + "\n" for i, note in enumerate(notes)))
    return path


def test_labels_made_the_other_way_about_the_note_than_the_rollbacks_are_named(tmp_path):
    from attribution.sources.labelfile import note_mismatch

    told = _label_file(tmp_path / "told.jsonl", True, True)
    assert note_mismatch(told, True) is None and note_mismatch(tmp_path / "missing.jsonl", False) is None
    said = note_mismatch(told, False)
    assert "were made with the rollback note" in said and "drop --no-note" in said
    for note in (True, False):  # labels made both ways: no flag helps, only labelling again one way
        said = note_mismatch(_label_file(tmp_path / "both.jsonl", True, False), note, "--no-rollback-note")
        assert "made both with and without" in said and "--no-rollback-note" not in said
        assert "label the failures again one way" in said


def test_a_calibration_names_the_labels_its_scorer_was_trained_on_too(tmp_path):
    from attribution.conformal import Calibration
    from attribution.sources.labelfile import note_mismatch
    from attribution.sources.scorefile import TrainSource

    told = str(_label_file(tmp_path / "told.jsonl", True))
    # score-steps --labels, then calibrate without them: the labels are the scorer's training labels only
    cal = Calibration.model_construct(labels_path=None, scorer_train=TrainSource(labels=told))
    assert cal.label_files == [told]
    assert "were made with the rollback note" in note_mismatch(cal.label_files, False)
    both = Calibration.model_construct(labels_path=told, scorer_train=TrainSource(labels=told))
    assert both.label_files == [told, told] and note_mismatch(both.label_files, True) is None
    assert Calibration.model_construct(labels_path=None, scorer_train=None).label_files == []


def test_run_warns_when_its_rollback_labels_were_made_with_the_note_it_leaves_out(tmp_path, capsys):
    labels = _label_file(tmp_path / "labels.jsonl", True)
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--task-limit", "1",
                 "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none", "--rollback",
                 "conformal", "--calibration", "self", "--rollback-labels", str(labels),
                 "--no-rollback-note"]) == 0  # nothing failed, so nothing to roll back
    assert "warning: the calibration's labels" in capsys.readouterr().err


def test_an_out_path_that_cannot_be_written_is_refused_before_any_replay(tmp_path, monkeypatch, capsys):
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--task-limit", "1", "--output-root", str(tmp_path), "--experiment-id", "e", "--progress",
                 "none"]) == 0

    async def never(*args, **kwargs):
        raise AssertionError("a replay ran")

    monkeypatch.setattr(labels_mod, "label_failure", never)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    for out, says in ((tmp_path / "adir", "is a directory"), (tmp_path / "afile" / "labels.jsonl", "is a file")):
        capsys.readouterr()
        assert main(["label-failures", "--experiment-root", str(tmp_path / "e"), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"--out {out}" in err and says in err


def test_a_rollback_of_a_run_given_by_a_relative_path_names_it_absolutely(tmp_path, monkeypatch, capsys):
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--task-limit", "1", "--output-root", str(tmp_path), "--experiment-id", "e", "--progress",
                 "none"]) == 0
    run = next((tmp_path / "e").rglob("run_0.result.json")).parent / "run_0"
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["rollback", "--run-dir", str(run.relative_to(tmp_path)), "--strategy", "restart"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == str(run.resolve())


def test_labels_of_another_experiment_over_the_same_tasks_are_refused(tmp_path, capsys):
    from attribution.sources.labelfile import Label
    from attribution.sources.loaders import load_runs_dir

    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--task-limit", "2", "--output-root", str(tmp_path), "--experiment-id", "base", "--progress",
                 "none"]) == 0
    trajs = load_runs_dir(tmp_path / "base").trajectories

    def labels(experiment):  # the same run ids and lengths: only the experiment tells them apart
        path = tmp_path / f"{experiment}.labels.jsonl"
        path.write_text("".join(Label(
            run_id=t.id, run=str(tmp_path / experiment / t.id), status="labelled", decisive_step=0,
            decisive_agent=t.steps[0].agent, flip_probability=1.0, flip_ci=(0.2, 1.0), replays=1, tokens=1,
            n_steps=t.n_steps, candidates=1, samples=1, probes=[]).model_dump_json() + "\n" for t in trajs))
        return path

    scores = tmp_path / "s.jsonl"
    for command in (["score-steps", "--runs-dir", str(tmp_path / "base"), "--scorer", "position", "--out",
                     str(scores)],
                    ["attribute", "--method", "random", "--runs-dir", str(tmp_path / "base"), "--out",
                     str(tmp_path / "attr")]):
        capsys.readouterr()
        assert main([*command, "--labels", str(labels("other"))]) == 2
        err = capsys.readouterr().err
        assert "other.labels.jsonl: label of" in err and "of experiment 'other'" in err and "'base'" in err
        assert main([*command, "--labels", str(labels("base"))]) == 0
    assert main(["score-steps", "--runs-dir", str(tmp_path / "base"), "--scorer", "position", "--out",
                 str(scores)]) == 0
    capsys.readouterr()
    assert main(["calibrate", "--scores", str(scores), "--labels", str(labels("other")), "--method", "lf", "--alpha",
                 "0.3", "--out", str(tmp_path / "cal.json")]) == 2  # position scores record the runs they scored
    assert "of experiment 'other'" in capsys.readouterr().err


def test_a_label_whose_decisive_step_is_outside_its_run_is_refused():
    from attribution.sources.labelfile import Label

    traj = Trajectory(id="t", query="q", steps=[Step(index=i, agent="a", content="x") for i in range(3)])
    for step in (-1, 3, 10**6):
        lab = Label(run_id="t", status="labelled", decisive_step=step, decisive_agent="a", flip_probability=1.0,
                    flip_ci=(0.2, 1.0), replays=1, tokens=1, n_steps=3, candidates=3, samples=1, probes=[])
        with pytest.raises(UserError, match=f"labels.jsonl: label of t: field 'decisive_step': expected a step "
                                            f"from 0 to 2, got {step}"):
            apply_labels([traj], {"t": lab}, "labels.jsonl")
