"""scripts/bench_sweep.py end to end with tiny sweeps (about 35 s on 2 cores): every figure is printed and sane."""

import re
import statistics

import pytest

from tests.scripts_loader import load_script


@pytest.mark.serial  # measures the efficiency of sweeps, with a dask cluster of worker processes
def test_bench_sweep_prints_overhead_and_three_efficiency_variants(capsys):
    argv = ["--runs", "8", "--concurrency", "2", "--latency-ms", "20", "--overhead-tasks", "2", "--repeats", "1",
            "--efficiency-repeats", "2", "--workers", "2", "--skip-embedded"]
    assert load_script("bench_sweep").main(argv) == 0
    out = capsys.readouterr().out
    overheads = re.findall(r"^tracing overhead \((sas|debate), 2 traced/untraced pairs.*overhead ([-+0-9.]+) % "
                           r"\(95 % CI ([-+0-9.]+) to ([-+0-9.]+) %\)", out, re.M)
    assert [system for system, *_ in overheads] == ["sas", "debate"]
    for _, median, lo, hi in overheads:
        assert float(lo) <= float(median) <= float(hi)
    cpu = re.findall(r"^tracing overhead .*; CPU time .* ms/call, overhead ([-+0-9.]+) % \(95 % CI ([-+0-9.]+) to "
                     r"([-+0-9.]+) %\)", out, re.M)
    assert len(cpu) == 2 and all(float(lo) <= float(median) <= float(hi) for median, lo, hi in cpu)
    exports = re.findall(r"^export overhead \((sas|debate), 1 exported/unexported pairs of blocks of 2 traced runs, OTLP/HTTP "
                         r"to a local receiver process\).*overhead ([-+0-9.]+) % \(95 % CI ([-+0-9.]+) to ([-+0-9.]+) %\)",
                         out, re.M)
    assert [system for system, *_ in exports] == ["sas", "debate"]
    for _, median, lo, hi in exports:
        assert float(lo) <= float(median) <= float(hi)
    effs = re.findall(r"^sweep efficiency \(sas, 8 runs, C=2 slots, (.*?), 20 ms/call\).*efficiency "
                      r"([0-9.]+) \(median of 2 sweeps: ([0-9.]+), ([0-9.]+)\)", out, re.M)
    assert [how.split(",")[0] for how, *_ in effs] == ["2 runs at once", "4 runs at once", "4 runs at once on a dask "
                                                       "cluster of 2 local worker processes"]
    for _, median, low, high in effs:
        assert 0.0 < float(low) <= float(median) <= float(high) <= 1.05


def test_median_ci_brackets_the_median_by_order_statistics():
    median_ci = load_script("bench_sweep").median_ci
    assert median_ci([float(x) for x in range(1, 102)]) == (51.0, 41.0, 61.0)
    assert median_ci([3.0]) == (3.0, 3.0, 3.0)


@pytest.mark.embedded
def test_saturation_compares_the_sweep_with_the_server_probed_before_and_after():
    bench = load_script("bench_sweep")
    bench.PROBE_ROUNDS, bench.PROBE_TOKENS_BEFORE = 1, 32  # one short round each side: a smoke test, not a figure
    s = bench.measure_saturation(tasks=2, system="sas")
    assert len(s["before"]) == len(s["after"]) == 1 and s["runs"] == 2 and s["tokens_out"] > 0
    assert s["peak_tok_s"] == statistics.median(s["before"] + s["after"]) > 0
    assert s["saturation"] == pytest.approx(s["tokens_out"] / s["sweep_s"] / s["peak_tok_s"])
