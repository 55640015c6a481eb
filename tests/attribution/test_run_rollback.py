"""``run --rollback``: every failed run rolled back once after the sweep, the summary before and after, the
cross-fitted self-calibration, and bad input refused before any run."""

import asyncio
import json
from pathlib import Path

import pytest

import attribution.rollback.sweep as sr
from attribution.sources.loaders import load_runs_dir
from attribution.scorers.crossfit import group_key
from main import main

LONG = ["--set", "benchmarks.arith.min_ops=8", "--set", "benchmarks.arith.max_ops=12",
        "--set", "mas.max_tool_iterations=16"]


def run(root, name, *extra, tasks=6, systems="sas", inject="1.0"):
    argv = ["run", "--benchmark", "arith", "--systems", systems, "--model", "scripted", "--task-limit", str(tasks),
            "--output-root", str(root), "--experiment-id", name, "--progress", "none", *LONG, *extra]
    if inject is not None:
        argv += ["--inject-errors", inject]
    return main(argv)


def rollback_records(root):
    return sorted(Path(root).rglob("run_*.rollback_*.json"), key=str)


def own_records(root):
    return [p for p in rollback_records(root) if p.name.count(".") == 2]  # run_<r>.rollback_<k>.json


def test_run_rollback_restart_rolls_back_each_failed_run_once(tmp_path, capsys):
    assert run(tmp_path, "e", "--rollback", "restart", "--inject-position", "mid", systems="sas,debate") == 0
    root = tmp_path / "e"
    failed = [p for p in root.rglob("run_0.result.json") if not json.loads(p.read_text())["success"]]
    recs = own_records(root)
    assert len(recs) == len(failed) == 6  # every sas run fails (injected), debate corrects itself
    assert {p.parent for p in recs} == {p.parent for p in failed}
    for p in recs:
        rec = json.loads(p.read_text())
        assert rec["origin"] == "sweep" and rec["strategy"] == "restart" and rec["restart_step"] == 0
        assert rec["success"] is True and rec["restart_covers"] is True
    out = capsys.readouterr().out
    assert "rollback (restart): 6 of 6 failed run(s) rolled back now" in out
    assert "success after rollback" in out

    summary = json.loads((root / "experiment_summary.json").read_text())
    rows = {r["system"]: r for r in summary["rollups"]}
    assert rows["sas"]["success_rate"] == 0.0 and rows["sas"]["success_after_rollback"] == 1.0
    assert rows["sas"]["rolled_back"] == 6 and rows["sas"]["rollback_tokens"] > 0
    # recomputable from the rollback records: tokens per run, averaged over tasks (one run per task)
    tokens = [json.loads(p.read_text())["tokens"] for p in recs]
    assert rows["sas"]["rollback_tokens"] == pytest.approx(sum(tokens) / len(tokens))
    assert rows["debate"]["rolled_back"] == 0 and rows["debate"]["success_after_rollback"] == 1.0
    assert rows["debate"]["rollback_tokens"] == 0.0
    sweep = json.loads((root / "rollback_sweep.json").read_text())
    assert sweep["strategy"] == "restart" and sweep["n_failed"] == 6 and sweep["n_rolled_back"] == 6

    # the same command again: nothing is run or rolled back twice, the summary stays
    before = {p: p.stat().st_mtime_ns for p in rollback_records(root)}
    assert run(tmp_path, "e", "--rollback", "restart", "--inject-position", "mid", systems="sas,debate") == 0
    assert {p: p.stat().st_mtime_ns for p in rollback_records(root)} == before
    assert "0 of 6 failed run(s) rolled back now, 6 earlier" in capsys.readouterr().out
    again = json.loads((root / "experiment_summary.json").read_text())
    assert {r["system"]: r["success_after_rollback"] for r in again["rollups"]} == {"sas": 1.0, "debate": 1.0}


def test_a_sweep_without_rollback_has_blank_rollback_columns(tmp_path):
    assert run(tmp_path, "e", inject="0.5") == 0
    rows = json.loads((tmp_path / "e" / "experiment_summary.json").read_text())["rollups"]
    assert all(r["success_after_rollback"] is None and r["rolled_back"] is None for r in rows)
    assert "success_after_rollback" not in (tmp_path / "e" / "experiment_summary.csv").read_text().splitlines()[1]


def test_manual_rollbacks_do_not_count_as_the_sweeps(tmp_path):
    assert run(tmp_path, "e", tasks=3) == 0
    root = tmp_path / "e"
    assert main(["rollback-experiment", "--experiment-root", str(root), "--strategies", "restart",
                 "--out", str(tmp_path / "o")]) == 0
    assert main(["summarize-experiment", "--experiment-root", str(root), "--no-plots"]) == 0
    row = json.loads((root / "experiment_summary.json").read_text())["rollups"][0]
    assert row["success_rate"] == 0.0 and row["success_after_rollback"] is None  # no `run --rollback` here


@pytest.mark.slow
def test_run_rollback_conformal_self_calibrates(tmp_path, capsys):
    """Thirty tasks (about 30 s): five folds of six, auto at alpha 0.2 over 24 calibration runs per fold."""
    assert run(tmp_path, "e", "--rollback", "conformal", "--rollback-alpha", "0.2", "--inject-position", "right",
               tasks=30) == 0
    root = tmp_path / "e"
    sweep = json.loads((root / "rollback_sweep.json").read_text())
    assert sweep["calibration"] is None and sweep["method"] == "auto" and len(sweep["folds"]) == 5
    assert all(f["n_calibration"] + f["n_selection"] == 24 and f["q_hat"] != "inf" for f in sweep["folds"])
    recs = [json.loads(p.read_text()) for p in own_records(root)]
    assert len(recs) == 30 and all(r["strategy"] == "conformal" for r in recs)
    cost = sum(r["cost"] for r in recs) / 30
    assert cost < 0.7  # right-dense errors: far less than a restart
    assert sum(r["success"] for r in recs) >= 21  # 1 - alpha = 0.8 expected, within the noise of 30 runs


def test_self_calibration_never_scores_or_calibrates_a_run_with_what_saw_it(tmp_path, monkeypatch):
    """Every scorer fit is trained on runs of other folds than the ones it scores, and each fold's calibration
    holds none of the fold's runs."""
    assert run(tmp_path, "e", "--inject-position", "uniform", tasks=15) == 0
    failed = load_runs_dir(tmp_path / "e").trajectories
    opts = sr.SweepRollbackOptions(strategy="conformal", alpha=0.3, folds=5)
    fold = sr.fold_of(failed, opts.folds, opts.seed)
    calls, fits = [], []
    real_scores, real_fit = sr._scores, sr.fit

    async def spy_scores(scorer, targets, train, o):
        calls.append(([t.id for t in targets], [t.id for t in train]))
        return await real_scores(scorer, targets, train, o)

    def spy_fit(records, *a, **kw):
        fits.append([r.id for r in records])
        return real_fit(records, *a, **kw)

    monkeypatch.setattr(sr, "_scores", spy_scores)
    monkeypatch.setattr(sr, "fit", spy_fit)
    choices, info = asyncio.run(sr.self_calibrated_choices(failed, failed, opts))
    assert set(choices) == {t.id for t in failed}
    by_id = {t.id: t for t in failed}
    for targets, train in calls:
        assert not {fold[i] for i in targets} & {fold[i] for i in train}
        assert not {group_key(by_id[i]) for i in targets} & {group_key(by_id[i]) for i in train}
    assert len(fits) == len(info) == 5
    for ids, f in zip(fits, info):
        assert not set(ids) & set(f["runs"]) and {fold[i] for i in f["runs"]} == {f["fold"]}
        assert len(ids) == len(failed) - len(f["runs"])  # every other labelled run calibrates the fold


@pytest.mark.parametrize("extra, inject, says", [
    (["--rollback", "conformal"], None, "needs the failed runs' decisive steps"),
    (["--rollback", "oracle"], None, "needs the failed runs' decisive steps"),
    (["--calibration", "cal.json"], "1.0", "only used with --rollback"),
    (["--rollback", "restart", "--calibration", "cal.json"], "1.0", "used by --rollback conformal or top1"),
    (["--rollback-folds", "3"], "1.0", "--rollback-folds: only used with --rollback"),
    (["--rollback-label-samples", "3"], "1.0", "--rollback-label-samples: only used with --rollback"),
    (["--rollback", "restart", "--rollback-alpha", "0.2"], "1.0",
     "--rollback-alpha: used by --rollback conformal (to calibrate), not by --rollback restart"),
    (["--rollback", "retry", "--rollback-scorer", "position", "--rollback-folds", "3"], "1.0",
     "--rollback-scorer, --rollback-folds: used by --rollback conformal or top1"),
    (["--rollback", "top1", "--rollback-method", "lac"], "1.0", "--rollback-method: used by --rollback conformal (to"),
    (["--rollback", "conformal", "--calibration", "cal.json", "--rollback-folds", "3"], "1.0",
     "the calibration file fixes"),
    (["--rollback", "conformal", "--rollback-label-samples", "2"], "1.0",
     "--rollback-label-samples: used when --calibration self labels the sweep's own failures, not with the sweep's"),
    (["--rollback", "conformal", "--calibration", "self", "--rollback-labels", "nonexist.jsonl"], "1.0",
     "--rollback-labels nonexist.jsonl: file not found"),
    (["--rollback", "conformal", "--calibration", "missing.json"], "1.0", "calibration file not found"),
    (["--rollback", "conformal", "--rollback-method", "best"], "1.0", "--rollback-method: expected one of"),
    (["--rollback", "conformal", "--rollback-alpha", "1.5"], "1.0", "--rollback-alpha must lie"),
    (["--rollback", "restart", "--set", "storage.checkpoints=none"], "1.0", "storage.checkpoints is 'none'"),
    (["--rollback", "conformal", "--model", "embedded"], None, "pass --calibration FILE"),
])
def test_bad_rollback_input_is_one_line_exit_2_before_any_run(tmp_path, monkeypatch, capsys, extra, inject, says):
    monkeypatch.chdir(tmp_path)
    code = run(tmp_path, "x", *extra, inject=inject)
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def test_the_rollback_strategy_of_a_sweep_is_kept(tmp_path, capsys):
    assert run(tmp_path, "e", "--rollback", "restart", tasks=3) == 0
    capsys.readouterr()
    assert run(tmp_path, "e", "--rollback", "top1", tasks=3) == 2
    assert "rolled back with --rollback restart; this invocation asks for --rollback top1" in capsys.readouterr().err


def test_a_rollback_cut_short_is_resumed_only_the_way_it_began(tmp_path, capsys):
    # an invocation cut short after some runs were rolled back leaves their records and no rollback_sweep.json
    assert run(tmp_path, "e", "--rollback", "restart", tasks=3) == 0
    root = tmp_path / "e"
    (root / "rollback_sweep.json").unlink()
    capsys.readouterr()
    assert run(tmp_path, "e", "--rollback", "restart", "--no-rollback-note", tasks=3) == 2
    err = capsys.readouterr().err
    assert "cut short, rolled this run back with --rollback restart;" in err
    assert "this invocation asks for --rollback restart --no-rollback-note" in err
    assert run(tmp_path, "e", "--rollback", "top1", tasks=3) == 2
    assert run(tmp_path, "e", "--rollback", "restart", tasks=3) == 0  # the same way: resumed
    assert (root / "rollback_sweep.json").is_file()


def test_run_help_lists_the_rollback_options(capsys):
    try:
        assert main(["run", "--help"]) == 0
    except SystemExit as err:  # argparse's own exit, when main does not turn it into a status
        assert err.code == 0
    out = capsys.readouterr().out
    for flag in ("--rollback", "--calibration", "--rollback-alpha", "--inject-position"):
        assert flag in out


def test_run_rollback_with_a_calibration_file_uses_its_scorer(tmp_path):
    assert run(tmp_path, "cal", "--inject-position", "uniform", tasks=10) == 0
    scores, cal = tmp_path / "cal.scores.jsonl", tmp_path / "cal.json"
    assert main(["score-steps", "--runs-dir", str(tmp_path / "cal"), "--scorer", "learned", "--out", str(scores)]) == 0
    assert main(["calibrate", "--scores", str(scores), "--method", "trim", "--alpha", "0.3", "--out", str(cal)]) == 0
    assert run(tmp_path, "e", "--rollback", "conformal", "--calibration", str(cal), "--seed", "5", tasks=3) == 0
    sweep = json.loads((tmp_path / "e" / "rollback_sweep.json").read_text())
    assert sweep["calibration"] == str(cal.resolve()) and sweep["scorer"] == "learned" and sweep["folds"] == []
    assert sweep["method"] == "trim" and sweep["alpha"] == 0.3 and sweep["n_rolled_back"] == 3
    recs = [json.loads(p.read_text()) for p in own_records(tmp_path / "e")]
    assert len(recs) == 3 and all(r["strategy"] == "conformal" and r["origin"] == "sweep" for r in recs)


@pytest.mark.parametrize("strategy", ["top1", "oracle"])
def test_run_rollback_top1_and_oracle_self_serve(tmp_path, strategy):
    assert run(tmp_path, "e", "--rollback", strategy, "--inject-position", "mid", tasks=6) == 0
    recs = [json.loads(p.read_text()) for p in own_records(tmp_path / "e")]
    assert len(recs) == 6 and all(r["strategy"] == strategy for r in recs)
    if strategy == "oracle":
        assert all(r["restart_step"] == r["decisive_step"] and r["success"] for r in recs)


def test_a_rollback_that_cannot_run_is_an_error_and_is_retried(tmp_path, capsys):
    assert run(tmp_path, "e", tasks=3) == 0
    lost = sorted((tmp_path / "e").rglob("run_0.checkpoints.sqlite.gz"))[0]
    lost.unlink()  # this run can no longer be resumed
    capsys.readouterr()
    assert run(tmp_path, "e", "--rollback", "restart", tasks=3) == 1
    err = capsys.readouterr().err
    assert "1 rollback(s) could not run" in err and lost.parent.name in err
    sweep = json.loads((tmp_path / "e" / "rollback_sweep.json").read_text())
    assert (sweep["n_rolled_back"], sweep["n_errors"]) == (2, 1)
    row = json.loads((tmp_path / "e" / "experiment_summary.json").read_text())["rollups"][0]
    assert row["rolled_back"] == 2 and row["success_after_rollback"] == pytest.approx(2 / 3)
    assert run(tmp_path, "e", "--rollback", "restart", tasks=3) == 1  # retried, not skipped
    sweep = json.loads((tmp_path / "e" / "rollback_sweep.json").read_text())
    assert (sweep["n_rolled_back"], sweep["n_already"], sweep["n_errors"]) == (0, 2, 1)
