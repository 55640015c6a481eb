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
