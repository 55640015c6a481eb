"""scripts/bench_sweep.py end to end with tiny sweeps (about 25 s on 2 cores): every figure is printed and sane."""

import re

from tests.scripts_loader import load_script


def test_bench_sweep_prints_overhead_and_three_efficiency_variants(capsys):
    argv = ["--runs", "8", "--concurrency", "2", "--latency-ms", "20", "--overhead-tasks", "2", "--repeats", "1",
            "--efficiency-repeats", "2", "--workers", "2", "--skip-embedded"]
    assert load_script("bench_sweep").main(argv) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"^tracing overhead \((sas|debate),", out, re.M)) == 2
    effs = re.findall(r"^sweep efficiency \(sas, 8 runs, C=2 slots, (.*?), 20 ms/call\).*efficiency "
                      r"([0-9.]+) \(median of 2 sweeps: ([0-9.]+), ([0-9.]+)\)", out, re.M)
    assert [how.split(",")[0] for how, *_ in effs] == ["2 runs at once", "4 runs at once", "4 runs at once on a dask "
                                                       "cluster of 2 local worker processes"]
    for _, median, low, high in effs:
        assert 0.0 < float(low) <= float(median) <= float(high) <= 1.05
