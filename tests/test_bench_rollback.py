"""scripts/bench_rollback.py end to end on a small scripted sweep (about 10 s)."""

from tests.scripts_loader import load_script


def test_bench_rollback_prints_every_strategy_and_the_oracle_cost(tmp_path, capsys):
    keep = tmp_path / "out"
    argv = ["--cal-tasks", "8", "--test-tasks", "4", "--methods", "vcp", "--keep", str(keep)]
    assert load_script("bench_rollback").main(argv) == 0
    out = capsys.readouterr().out
    table = {line.split()[0] if not line.startswith("conformal") else "conformal": line.split()
             for line in out.splitlines() if line.startswith(("conformal ", "top1 ", "restart ", "oracle "))}
    assert set(table) == {"conformal", "top1", "restart", "oracle"}
    assert table["restart"][1:] == ["1.000", "1.000", "1.000"]  # a full restart always fixes the scripted error
    oracle_cost = float(table["oracle"][3])
    assert 0.0 < oracle_cost < 1.0
    assert (keep / "rollback.vcp" / "rollback_results.json").is_file()
