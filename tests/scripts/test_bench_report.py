"""scripts/bench_report.py end to end on a small scripted sweep (a sweep, a report, three pages in Chromium)."""

import re

import pytest

from tests.scripts_loader import load_script

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_bench_report_prints_its_figures(tmp_path, capsys):
    bench = load_script("bench_report")
    if bench.find_chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    code = bench.main(["--experiment-root", str(tmp_path / "e48"), "--runs", "48", "--loads", "1"])
    out = capsys.readouterr().out
    assert re.search(r"report of 48 runs written in [\d.]+ s \(target <= 30 s; [\d.]+ s of CPU", out), out
    for page in ("index", "grid page"):
        assert re.search(rf"^{page}: DOMContentLoaded \d+ ms, median of 1.*; 0 console errors", out, re.M), out
    assert re.search(r"^run page: DOMContentLoaded \d+ ms, run drawn from its data at \d+ ms, median of 1.*; "
                     r"0 console errors", out, re.M), out
    assert code == 0 and out.rstrip().endswith("targets met")
