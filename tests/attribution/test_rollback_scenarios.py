"""Rollback scenarios: injected errors placed by relative position, longer arith runs, the oracle and the
paper's rollback coverage."""

import json
import random
from pathlib import Path

import pytest

from attribution.rollback.restart import choose_restart
from attribution.rollback.experiment import aggregate
from benchmark.registry import get_benchmark
from descriptor.errors import UserError
from descriptor.layout import RunKey, RunPaths
from descriptor.records import RollbackRecord
from descriptor.run_config import read_metadata_with_config
from main import main
from mas.config import ExperimentConfig
from mas.overrides import apply_overrides
from mas.sweep.injection import POSITIONS, injection_plan, place

LONG = ["--set", "benchmarks.arith.min_ops=10", "--set", "benchmarks.arith.max_ops=20",
        "--set", "mas.max_tool_iterations=24"]


def sweep(root, name, *extra, tasks=12, systems="sas", seed=0):
    argv = ["run", "--benchmark", "arith", "--systems", systems, "--model", "scripted", "--task-limit", str(tasks),
            "--seed", str(seed), "--output-root", str(root), "--experiment-id", name, "--progress", "none", *extra]
    assert main(argv) == 0
    return Path(root) / name


def metadata(root):
    """Each run's metadata with its config (stored once per experiment, by hash) filled in."""
    return [read_metadata_with_config(RunPaths.parse(p)).model_dump(mode="json")
            for p in sorted(Path(root).rglob("run_0.metadata.json"))]


def test_arith_takes_a_number_of_operations():
    tasks = get_benchmark("arith", {"min_ops": 12, "max_ops": 15}).load_tasks(20)
    assert all(12 <= len(t.metadata["ops"]) <= 15 for t in tasks)
    # the defaults are the old 3-5 operations, task for task
    old = get_benchmark("arith").load_tasks(5)
    assert [t.question for t in old] == [t.question for t in get_benchmark("arith", {"min_ops": 3, "max_ops": 5})
                                         .load_tasks(5)]
    assert all(3 <= len(t.metadata["ops"]) <= 5 for t in old)


@pytest.mark.parametrize("options, says", [({"min_ops": 0}, "benchmarks.arith.min_ops"),
                                           ({"max_ops": "many"}, "benchmarks.arith.max_ops"),
                                           ({"min_ops": 6, "max_ops": 5}, "must not exceed")])
def test_bad_arith_options_are_refused(options, says):
    with pytest.raises(UserError, match=says):
        get_benchmark("arith", options)


def test_place_maps_a_fraction_to_a_step():
    assert [place(u, 10) for u in (0.0, 0.099, 0.1, 0.5, 0.999, 1.0)] == [0, 0, 1, 5, 9, 9]
    assert place(0.7, 1) == 0


@pytest.mark.parametrize("position, lo, hi", [("left", 0.0, 1 / 3), ("mid", 1 / 3, 2 / 3), ("right", 2 / 3, 1.0)])
def test_positions_are_dense_in_their_third(position, lo, hi):
    cfg = apply_overrides(ExperimentConfig(), model="scripted", **{"inject.rate": 1.0, "inject.position": position})
    us = [injection_plan(cfg, RunKey(experiment_id="e", benchmark="arith", system="sas", task_id=f"t{i}",
                                     run_index=0, seed=0)).fraction for i in range(2000)]
    inside = sum(lo <= u < hi for u in us) / len(us)
    assert inside > 0.78  # about 85 % by the densities' definition (the module docstring's table)
    a, b = POSITIONS[position]
    assert abs(sum(us) / len(us) - a / (a + b)) < 0.02


def test_without_a_position_the_old_rule_holds():
    cfg = apply_overrides(ExperimentConfig(), model="scripted", **{"inject.rate": 1.0})
    plans = [injection_plan(cfg, RunKey(experiment_id="e", benchmark="arith", system="sas", task_id=f"t{i}",
                                        run_index=0, seed=0)) for i in range(50)]
    assert {p.step for p in plans} <= {0, 1, 2, 3} and all(p.position is None for p in plans)
    # the same draw as before positions existed (seeded by the run identity)
    rng = random.Random("inject|0|arith|sas|t0|0")
    rng.random()
    assert plans[0].step == rng.randrange(0, 4)


@pytest.mark.parametrize("position, lo, hi", [("left", 0.0, 1 / 3), ("right", 2 / 3, 1.0)])
def test_injected_errors_land_in_their_part_of_long_runs(tmp_path, position, lo, hi):
    root = sweep(tmp_path, position, "--inject-errors", "1.0", "--inject-position", position, *LONG)
    metas = metadata(root)
    assert len(metas) == 12
    rel = []
    for m in metas:
        plan, fired = m["injection_plan"], m["injected_error"]
        assert plan["position"] == position and 0.0 <= plan["fraction"] < 1.0
        assert 11 <= plan["probe_steps"] <= 21  # one calculator call per operation, then the answer
        assert plan["step"] == place(plan["fraction"], plan["probe_steps"])
        assert fired["step"] == plan["step"]  # sas changes every step it is asked to get wrong
        n = plan["probe_steps"]
        rel.append((fired["step"] / n, (fired["step"] + 1) / n))  # the stretch of the run the step covers
        assert m["config"]["inject"]["position"] == position
    # dense there: about 85 % of the draws in the third, 9 of 12 allowed (the draws are seeded)
    assert sum(start < hi and end > lo for start, end in rel) >= 9
    results = [json.loads(p.read_text()) for p in root.rglob("run_0.result.json")]
    assert not any(r["success"] for r in results)  # every injected error is decisive for sas on arith


def test_the_step_count_is_of_the_honest_run(tmp_path):
    """A run without injection has exactly the counted steps: the plan's length is the error-free run's."""
    honest = sweep(tmp_path, "honest", *LONG, tasks=3)
    placed = sweep(tmp_path, "placed", "--inject-errors", "1.0", "--inject-position", "uniform", *LONG, tasks=3)
    for h, p in zip(sorted(honest.rglob("run_0.trajectory.json")), sorted(placed.rglob("run_0.metadata.json"))):
        table = json.loads(h.read_text())["events"]
        steps = [row for row in table["data"] if row[table["columns"].index("step_index")] is not None]
        assert json.loads(p.read_text())["injection_plan"]["probe_steps"] == len(steps)


@pytest.mark.parametrize("argv, says", [
    (["--inject-position", "left", "--model", "embedded"], "only the scripted model injects errors"),
    (["--inject-position", "mid", "--model", "scripted", "--set", "inject.step=2"], "set one of them"),
    (["--inject-position", "top", "--model", "scripted"], "invalid choice"),
])
def test_bad_position_input_is_one_line_exit_2(tmp_path, capsys, argv, says):
    code = None
    try:
        code = main(["run", "--benchmark", "arith", "--task-limit", "1", "--output-root", str(tmp_path),
                     "--experiment-id", "x", "--progress", "none", *argv])
    except SystemExit as err:  # argparse's own errors
        code = err.code
    assert code == 2
    err = capsys.readouterr().err
    assert says in err
    assert not (tmp_path / "x").exists()


def record(**kw):
    base = dict(run="r", rollback_index=0, strategy="conformal", set=[], restart_step=0, n_steps=10,
                steps_redone=1, cost=1.0, tokens=1, success=True, answer="1", decisive_step=4, covered=None,
                wall_time_s=0.0)
    return RollbackRecord(**{**base, **kw})


def test_rollback_coverage_is_restart_at_or_before_the_decisive_step():
    before = record(set=[1, 2], restart_step=1, covered=False, restart_covers=True)  # set wholly before the error
    holds = record(set=[3, 4, 5], restart_step=3, covered=True, restart_covers=True)
    after = record(set=[6, 7], restart_step=6, covered=False, restart_covers=False, success=False)
    agg = aggregate([before, holds, after])
    assert agg["coverage"] == pytest.approx(2 / 3) and agg["set_coverage"] == pytest.approx(1 / 3)
    assert agg["coverage_n"] == 3
    lo, hi = agg["coverage_ci"]
    assert lo < 2 / 3 < hi
    lo, hi = agg["cost_ci"]
    assert lo <= agg["cost"] <= hi


def test_oracle_restarts_at_the_decisive_step_and_needs_one():
    assert choose_restart("oracle", None, None, 7).step == 7
    with pytest.raises(UserError, match="known decisive step"):
        choose_restart("oracle", None, None, None)


def test_oracle_in_rollback_experiment(tmp_path, capsys):
    root = sweep(tmp_path, "e", "--inject-errors", "1.0", "--inject-position", "mid", *LONG, tasks=6)
    out = tmp_path / "out"
    assert main(["rollback-experiment", "--experiment-root", str(root), "--strategies", "oracle,restart",
                 "--out", str(out)]) == 0
    res = json.loads((out / "rollback_results.json").read_text())
    oracle = res["oracle"]
    assert oracle["n"] == 6 and oracle["success_rate"] == 1.0 and oracle["coverage"] == 1.0
    runs = oracle["runs"]
    assert all(r["restart_step"] == r["decisive_step"] and r["restart_covers"] for r in runs)
    assert oracle["cost"] == pytest.approx(sum((r["n_steps"] - r["decisive_step"]) / r["n_steps"] for r in runs) / 6)
    assert res["restart"]["cost"] == 1.0 and oracle["cost"] < 1.0
    table = capsys.readouterr().out
    assert "oracle" in table and "[" in table  # every figure with its interval


def test_oracle_without_known_decisive_steps_is_refused(tmp_path, capsys):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[models.default]\nprovider = "scripted"\nmodel = "scripted"\n')
    # gsm8k-like failures without injection: the scripted model answers "0" to a non-arith task
    assert main(["run", "--config", str(cfg), "--benchmark", "gsm8k", "--task-limit", "2", "--output-root",
                 str(tmp_path), "--experiment-id", "n", "--progress", "none"]) == 0
    code = main(["rollback-experiment", "--experiment-root", str(tmp_path / "n"), "--strategies", "oracle",
                 "--out", str(tmp_path / "o")])
    assert code == 2 and "drop oracle" in capsys.readouterr().err


def counted_rollbacks(monkeypatch) -> list[str]:
    """The strategies of the rollbacks ``rollback-experiment`` makes from now on (a reused one is not made)."""
    import attribution.rollback.experiment as experiment

    calls: list[str] = []
    real = experiment.rollback_one

    async def counting(traj, **kw):
        calls.append(kw["strategy"])
        return await real(traj, **kw)

    monkeypatch.setattr(experiment, "rollback_one", counting)
    return calls


def test_rollback_experiment_run_again_with_the_same_out_reuses_the_rollbacks_it_finished(tmp_path, monkeypatch):
    from attribution.rollback.progress import PROGRESS_FILE

    root = sweep(tmp_path, "e", "--inject-errors", "1.0", "--inject-position", "mid", *LONG, tasks=4)
    out = tmp_path / "out"
    argv = ["rollback-experiment", "--experiment-root", str(root), "--strategies", "oracle,restart", "--out", str(out)]
    assert main(argv) == 0
    first = json.loads((out / "rollback_results.json").read_text())
    assert first["restart"]["n"] == first["oracle"]["n"] == 4
    calls = counted_rollbacks(monkeypatch)
    assert main(argv) == 0  # everything finished: nothing is redone, the same figures come out
    assert calls == []
    assert json.loads((out / "rollback_results.json").read_text()) == first
    # an invocation killed after three rollbacks, the fourth line cut short: the other five are redone
    progress = out / PROGRESS_FILE
    lines = progress.read_text().splitlines()
    progress.write_text("\n".join(lines[:4]) + "\n" + lines[4][:40])
    assert main(argv) == 0
    assert len(calls) == 5
    again = json.loads((out / "rollback_results.json").read_text())
    assert [r["run"] for r in again["restart"]["runs"]] == [r["run"] for r in first["restart"]["runs"]]
    # a rollback whose record file is gone is redone too, not reported from the progress file alone
    calls.clear()
    gone = Path(again["restart"]["runs"][0]["run"] + f".rollback_{again['restart']['runs'][0]['rollback_index']}.json")
    gone.unlink()
    assert main(argv) == 0 and calls == ["restart"]


def test_rollback_experiment_refuses_an_out_holding_another_experiments_rollbacks(tmp_path, capsys):
    a = sweep(tmp_path, "a", "--inject-errors", "1.0", tasks=2)
    b = sweep(tmp_path, "b", "--inject-errors", "1.0", tasks=2)
    out = tmp_path / "out"
    assert main(["rollback-experiment", "--experiment-root", str(a), "--strategies", "restart", "--out", str(out)]) == 0
    before = (out / "rollbacks.jsonl").read_text()
    code = main(["rollback-experiment", "--experiment-root", str(b), "--strategies", "restart", "--out", str(out)])
    assert code == 2 and "another experiment" in capsys.readouterr().err
    assert (out / "rollbacks.jsonl").read_text() == before


def test_rollback_experiment_with_a_file_as_out_exits_2(tmp_path, capsys):
    root = sweep(tmp_path, "e", "--inject-errors", "1.0", tasks=2)
    out = tmp_path / "out.json"
    out.write_text("{}")
    code = main(["rollback-experiment", "--experiment-root", str(root), "--strategies", "restart", "--out", str(out)])
    assert code == 2 and "expected a directory" in capsys.readouterr().err
    assert not list(root.rglob("*.rollback_*"))  # nothing rolled back


@pytest.mark.parametrize(("strategies", "said"), [("conformal,restrat", "unknown strategy restrat"), (",", "none given")])
def test_a_wrong_strategies_list_is_named_before_any_scorer_is_asked_for(tmp_path, capsys, strategies, said):
    # conformal needs a scorer (--train-dir or --scores); the misspelt list must be what the error names
    code = main(["rollback-experiment", "--experiment-root", str(tmp_path), "--strategies", strategies,
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "--strategies" in err and said in err and "train-dir" not in err
    assert not (tmp_path / "o").exists()


def test_rollback_experiment_with_no_note_records_it_and_does_not_reuse_rollbacks_told_of_the_failure(tmp_path,
                                                                                                        monkeypatch):
    root = sweep(tmp_path, "e", "--inject-errors", "1.0", "--inject-position", "mid", *LONG, tasks=2)
    out = tmp_path / "out"
    argv = ["rollback-experiment", "--experiment-root", str(root), "--strategies", "restart,retry", "--out", str(out)]
    assert main(argv) == 0
    told = json.loads((out / "rollback_results.json").read_text())
    assert told["note"] is True and {r["note"] for r in told["restart"]["runs"]} == {True}
    calls = counted_rollbacks(monkeypatch)
    assert main([*argv, "--no-note"]) == 0
    assert calls == ["restart", "restart"]  # retry never had a note: reused
    quiet = json.loads((out / "rollback_results.json").read_text())
    assert quiet["note"] is False and {r["note"] for r in quiet["restart"]["runs"]} == {False}
    assert {r["note"] for r in quiet["retry"]["runs"]} == {False}


def test_rollback_records_name_their_runs_by_absolute_path_when_the_root_was_given_relative(tmp_path, monkeypatch):
    root = sweep(tmp_path, "e", "--inject-errors", "1.0", tasks=1)
    monkeypatch.chdir(tmp_path)
    assert main(["rollback-experiment", "--experiment-root", "e", "--strategies", "restart", "--out", "o"]) == 0
    results = json.loads((tmp_path / "o" / "rollback_results.json").read_text())
    [run] = results["restart"]["runs"]
    assert run["run"].startswith(str(root.resolve())) and results["experiment_root"] == str(root.resolve())
