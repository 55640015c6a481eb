"""scripts/bench_rollback.py end to end on one small scenario (about 15 s)."""

import json

from tests.scripts_loader import load_script


def test_bench_rollback_prints_every_strategy_per_scenario(tmp_path, capsys):
    keep = tmp_path / "out"
    argv = ["--scenarios", "right", "--cal-tasks", "12", "--test-tasks", "4", "--min-ops", "6", "--max-ops", "8",
            "--alpha", "0.3", "--repeats", "1", "--keep", str(keep)]
    assert load_script("bench_rollback").main(argv) == 0
    out = capsys.readouterr().out
    assert "right-dense errors: 4 failed test runs; paper:" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")
            and line.split()[0] in ("conformal", "top1", "restart", "oracle")}
    assert set(rows) == {"conformal", "top1", "restart", "oracle"}
    assert "1.000 [" in rows["restart"] and rows["restart"].count("1.000") == 3  # success, coverage, cost
    saved = json.loads((keep / "bench_rollback.json").read_text())["right"]
    assert saved["oracle"]["success_rate"] == 1.0 and saved["oracle"]["coverage"] == 1.0
    assert 0.0 < saved["oracle"]["cost"] < 0.6  # right-dense: the oracle redoes the last part only
    assert any(line.startswith(("  met:", "  MISSED:")) for line in out.splitlines())


def test_success_target_is_met_only_by_a_pooled_estimate_at_the_target_with_its_interval_reaching_it():
    check = load_script("bench_rollback").success_target
    text, ok = check({"success_rate": 0.88, "success_rate_ci": [0.84, 0.91], "n": 300})
    assert not ok and "Wilson 95 % [0.840, 0.910]" in text and "within sampling error" in text
    assert check({"success_rate": 0.85, "success_rate_ci": [0.80, 0.89], "n": 300}) == (
        "success pooled 0.850 >= 0.90 and Wilson 95 % [0.800, 0.890] upper end >= 0.90 (n = 300)", False)
    assert check({"success_rate": 0.92, "success_rate_ci": [0.88, 0.95], "n": 300})[1]
