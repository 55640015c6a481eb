"""The whole conformal rollback loop on the project's own traces, with the scripted model.

A calibration sweep with one injected error per run is scored (`score-steps
--runs-dir`, trained scorer) and calibrated; a second sweep (other seed, so
other tasks) is rolled back with every strategy. The scripted model fixes an
injected error whenever the restart is at or before it.
"""

import hashlib
import json

from main import main

STRATEGIES = ("conformal", "top1", "restart")


def sweep(root, experiment_id, seed, tasks):
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--task-limit", str(tasks), "--seed", str(seed), "--output-root", str(root),
                 "--experiment-id", experiment_id, "--progress", "none"]) == 0
    return root / experiment_id


def snapshot(root):
    """Bytes and mtime of every file under ``root``."""
    return {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


def calibrated_loop(tmp_path, *, scorer, cal_tasks, test_tasks, method="rf"):
    """Calibration sweep → scores → calibration.json; returns (test sweep root, calibration path, score path)."""
    cal_root = sweep(tmp_path, "cal", 0, cal_tasks)
    scores = tmp_path / "cal.scores.jsonl"
    assert main(["score-steps", "--runs-dir", str(cal_root), "--scorer", scorer, "--out", str(scores)]) == 0
    cal = tmp_path / "calibration.json"
    assert main(["calibrate", "--scores", str(scores), "--method", method, "--alpha", "0.2", "--out", str(cal)]) == 0
    return sweep(tmp_path, "test", 1, test_tasks), cal, scores


def check_results(results, n_failed):
    for s in STRATEGIES:
        r = results[s]
        assert r["n"] == n_failed and len(r["runs"]) == n_failed
        assert 0.0 <= r["success_rate"] <= 1.0 and 0.0 <= r["coverage"] <= 1.0 and 0.0 < r["cost"] <= 1.0
        for key in ("success_rate_ci", "coverage_ci", "cost_ci"):
            lo, hi = r[key]
            assert lo <= r[key.removesuffix("_ci")] <= hi, key
    assert results["restart"]["cost"] == 1.0 and results["restart"]["success_rate"] == 1.0


def test_rollback_loop_on_scripted_traces(tmp_path, capsys):
    test_root, cal, scores = calibrated_loop(tmp_path, scorer="learned", cal_tasks=8, test_tasks=4)
    # the scorer and what it was trained on are recorded in every score row and in the calibration
    rows = [json.loads(line) for line in scores.read_text().splitlines()]
    trained_on = {"data_dir": None, "runs_dir": str((tmp_path / "cal").resolve()), "spans": None, "subset": "all",
                  "max_cases": None, "train_dir": None}
    assert rows and all(r["scorer"] == "learned" and r["scorer_train"] == trained_on for r in rows)
    calibration = json.loads(cal.read_text())
    assert calibration["scorer"] == "learned" and calibration["scorer_train"] == trained_on

    before = snapshot(test_root)
    n_failed = sum(not json.loads(p.read_text())["success"] for p in test_root.rglob("run_*.result.json"))
    assert n_failed > 0
    out = tmp_path / "out"
    assert main(["rollback-experiment", "--experiment-root", str(test_root), "--calibration", str(cal),
                 "--strategies", ",".join(STRATEGIES), "--out", str(out)]) == 0
    results = json.loads((out / "rollback_results.json").read_text())
    check_results(results, n_failed)
    assert results["scorer"] == "learned" and results["scoring"]["scorer_train"] == trained_on
    after = snapshot(test_root)
    assert {p: after[p] for p in before} == before  # the original runs are untouched
    assert all(".rollback_" in p.name for p in set(after) - set(before))

    # one run with the defaults, as the issue writes the command: the calibration says how to score
    run = next(test_root.rglob("run_0.result.json")).parent / "run_0"
    capsys.readouterr()
    assert main(["rollback", "--run-dir", str(run), "--calibration", str(cal)]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"] == "conformal"
    # another scorer than the calibration's voids the guarantee: refused
    assert main(["rollback", "--run-dir", str(run), "--calibration", str(cal), "--scorer", "position"]) == 2
    assert "would void its coverage guarantee" in capsys.readouterr().err


def test_rollback_loop_at_scale(tmp_path):
    """Twenty tasks per sweep with the position prior and the default strategies (about 10 s)."""
    test_root, cal, _ = calibrated_loop(tmp_path, scorer="position", cal_tasks=20, test_tasks=20)
    n_failed = sum(not json.loads(p.read_text())["success"] for p in test_root.rglob("run_*.result.json"))
    out = tmp_path / "out"
    assert main(["rollback-experiment", "--experiment-root", str(test_root), "--calibration", str(cal),
                 "--out", str(out)]) == 0
    results = json.loads((out / "rollback_results.json").read_text())
    check_results(results, n_failed)
    assert results["conformal"]["coverage"] >= 0.8 - 0.2  # 1 - alpha, within the noise of 20 runs


def test_llm_scorer_rollback_scores_only_what_the_filtration_scan_needs(tmp_path):
    cal_root = sweep(tmp_path, "cal", 0, 6)
    scores = tmp_path / "cal.scores.jsonl"
    assert main(["score-steps", "--runs-dir", str(cal_root), "--scorer", "llm_naive", "--model", "scripted",
                 "--out", str(scores)]) == 0
    cal = tmp_path / "calibration.json"
    assert main(["calibrate", "--scores", str(scores), "--method", "lf", "--alpha", "0.3", "--out", str(cal)]) == 0
    test_root = sweep(tmp_path, "test", 1, 4)

    def roll(strategies, out):
        assert main(["rollback-experiment", "--experiment-root", str(test_root), "--calibration", str(cal),
                     "--strategies", strategies, "--out", str(tmp_path / out)]) == 0
        return json.loads((tmp_path / out / "rollback_results.json").read_text())

    early = roll("conformal", "early")["conformal"]["runs"]
    full = roll("conformal,top1", "full")  # top1 needs every score: the same sets from full scoring
    assert [r["set"] for r in early] == [r["set"] for r in full["conformal"]["runs"]]
    every_step = [r["scoring_nfe"] for r in full["top1"]["runs"]]
    assert all(r["n_steps"] == n for r, n in zip(early, every_step, strict=True))  # llm_naive: one call a step
    assert all(r["scoring_nfe"] <= r["n_steps"] - 1 for r in early)  # g(whole) is inf: step 0 never scored
    assert sum(r["scoring_nfe"] for r in early) < sum(every_step)


def test_single_step_failures_are_pointed_out_when_strategies_are_compared():
    from attribution.cli.rollback import single_step_note

    runs = [{"n_steps": 1}, {"n_steps": 1}, {"n_steps": 5}]
    said = single_step_note(runs, ["conformal", "restart"])
    assert said.startswith("note: 2 of 3 failed run(s) took a single step") and "differ only by chance" in said
    assert single_step_note(runs, ["restart"]) is None  # nothing is compared
    assert single_step_note([{"n_steps": 4}], ["conformal", "restart"]) is None
    assert "restarts it from step 0" in single_step_note([{"n_steps": 1}], ["top1", "restart"])
