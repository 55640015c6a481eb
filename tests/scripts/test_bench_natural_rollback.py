"""scripts/bench_natural_rollback.py's table and goal line, from a rollback-experiment's results file."""

import json

from attribution.rollback.experiment import aggregate
from descriptor.records import RollbackRecord
from tests.scripts_loader import load_script


def _rec(run: str, strategy: str, *, restart: int, tokens: int, success: bool, status: str = "finished"):
    return RollbackRecord(run=run, rollback_index=0, strategy=strategy, set=list(range(restart, 6)),
                          chosen_step=restart, restart_step=restart, n_steps=6, cost=(6 - restart) / 6,
                          steps_redone=6 - restart, tokens=tokens, success=success, answer="", wall_time_s=1.0,
                          decisive_step=None, covered=None, status=status)


def test_the_goal_line_compares_success_and_tokens_with_restart_on_the_same_failures(tmp_path):
    runs = [f"r{i}" for i in range(4)]
    recs = {
        "conformal": [_rec(r, "conformal", restart=4, tokens=1000, success=i < 2) for i, r in enumerate(runs)],
        "top1": [_rec(r, "top1", restart=5, tokens=500, success=False) for r in runs],
        "restart": [_rec(r, "restart", restart=0, tokens=4000, success=i == 0) for i, r in enumerate(runs)]
        + [_rec("r9", "restart", restart=0, tokens=0, success=False, status="error")],  # no outcome: left out
    }
    (tmp_path / "rollback_results.json").write_text(json.dumps(
        {k: {**aggregate(v), "runs": [r.model_dump(mode="json") for r in v]} for k, v in recs.items()}))
    script = load_script("bench_natural_rollback")
    lines = script.report(script.strategy_rows(tmp_path))
    rows = {line.split()[0]: line for line in lines[1:5]}
    assert "2/4 = 0.500" in rows["conformal"] and "1,000" in rows["conformal"] and "4 (4)" in rows["conformal"]
    assert "1/4 = 0.250" in rows["restart"] and "4,000" in rows["restart"]
    goal = lines[-1]
    assert "conformal success 0.500 >= restart 0.250: met" in goal and "over 4 failures" in goal
    assert "tokens 0.25 x restart's <= 0.70: met" in goal
    assert "0/0" in rows["retry"] and not any(line.startswith("  against retry") for line in lines)


def test_a_retry_row_gets_its_own_comparison_before_the_goal(tmp_path):
    recs = {"conformal": [_rec("r0", "conformal", restart=4, tokens=1000, success=True)],
            "restart": [_rec("r0", "restart", restart=0, tokens=4000, success=False)],
            "retry": [_rec("r0", "retry", restart=0, tokens=2000, success=True)]}
    (tmp_path / "rollback_results.json").write_text(json.dumps(
        {k: {**aggregate(v), "runs": [r.model_dump(mode="json") for r in v]} for k, v in recs.items()}))
    script = load_script("bench_natural_rollback")
    lines = script.report(script.strategy_rows(tmp_path))
    assert lines[-2].startswith("  against retry: conformal success 1.000 >= retry 1.000: met")
    assert "tokens 0.50 x retry's <= 0.70: met" in lines[-2] and lines[-1].startswith("  goal:")


def test_draws_are_pooled_and_paired_by_each_failures_mean(tmp_path):
    def draw(path, conformal, restart):
        path.mkdir()
        recs = {"conformal": [_rec(f"r{i}", "conformal", restart=4, tokens=1000, success=ok)
                              for i, ok in enumerate(conformal)],
                "restart": [_rec(f"r{i}", "restart", restart=0, tokens=4000, success=ok)
                            for i, ok in enumerate(restart)]}
        (path / "rollback_results.json").write_text(json.dumps(
            {k: {**aggregate(v), "runs": [r.model_dump(mode="json") for r in v]} for k, v in recs.items()}))
        return path

    script = load_script("bench_natural_rollback")
    rows = script.pooled_rows([draw(tmp_path / "a", [True, False], [False, False]),
                               draw(tmp_path / "b", [True, True], [True, False])])
    assert len(rows["conformal"]) == 4 and len(rows["restart"]) == 4
    d, _ci, n = script.paired_difference(rows["conformal"], rows["restart"])
    assert n == 2 and d == ((1.0 - 0.5) + (0.5 - 0.0)) / 2  # r0: 2/2 against 1/2; r1: 1/2 against 0/2
    goal = script.report(rows)[-1]
    assert "conformal success 0.750 >= restart 0.250: met" in goal and "over 2 failures" in goal
