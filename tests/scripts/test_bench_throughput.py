"""scripts/bench_throughput.py end to end with tiny sweeps: every figure is printed and sane (no figure is judged
here: targets are the bench's, on a quiet machine)."""

import re

from tests.scripts_loader import load_script


def test_bench_throughput_prints_every_program_and_the_goals(capsys):
    argv = ["--concurrency", "2", "--rounds", "1", "--programs", "sas,debate,plain", "--waves", "2",
            "--delay-ms", "300", "--workers", "1"]
    assert load_script("bench_throughput").main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"^debate: 8 calls a run in 4 stages$", out, re.M), out
    rows = re.findall(r"^c=  2 +(sas|debate|plain): ([0-9.]+) \[.*?\] of ideal, .*? calls/s, connections ([0-9]+) "
                      r"\[.*?\] for ([0-9]+) calls, peak in flight ([0-9]+) .*CPU ms/call ([0-9.]+)", out, re.M)
    assert [r[0] for r in rows] == ["sas", "debate", "plain"], out
    for program, ratio, connections, calls, peak, cpu in rows:
        assert 0.0 < float(ratio) <= 1.1, (program, ratio)
        most = 6 if program == "debate" else 2  # calls in flight at most: 2 runs at once, 3 debaters each
        assert 1 <= int(connections) <= most and 1 <= int(peak) <= most, (program, connections, peak)
        assert int(calls) == {"sas": 4, "debate": 4 * 8, "plain": 4}[program] and float(cpu) > 0
    assert len(re.findall(r"^goal at c=2, (sas|debate): .* of ideal .* connections", out, re.M)) == 2
    assert "load avg" in out
