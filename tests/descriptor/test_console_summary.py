"""The summary a sweep ends with reads well at 80 columns: no value or header cut, one sentence per comparison."""

from __future__ import annotations

import doctest
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import descriptor.console_summary
import descriptor.console_table
from descriptor.console_summary import comparison_sentences, print_summary_table, summary_columns
from descriptor.report.analysis import paired_rows
from descriptor.economics import EconomicsSettings
from descriptor.summaries import ExperimentSummary, summarize_experiment
from main import main

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = "sas,debate,representative_exchange"  # the longest built-in name: 23 characters
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture(scope="module")
def summary(sweep) -> ExperimentSummary:
    return summarize_experiment(sweep, plots=False)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A scripted sweep with injected errors (so the systems differ), summarised."""
    root = tmp_path_factory.mktemp("console")
    assert main(["run", "--benchmark", "arith", "--systems", SYSTEMS, "--model", "scripted", "--task-limit", "4",
                 "--runs-per-task", "2", "--inject-errors", "0.5", "--output-root", str(root), "--experiment-id", "x",
                 "--progress", "none"]) == 0
    return root / "x"


def rendered(summary: ExperimentSummary, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_summary_table(summary, console, width=width)
    return console.file.getvalue()


def rules(text: str) -> int:
    """Tables in ``text``: the rules under their headers."""
    return sum(1 for line in text.splitlines() if line.strip() and set(line.strip()) == {"─"})


def assert_nothing_cut(text: str, summary: ExperimentSummary, width: int) -> None:
    """Every line but the title within ``width``; no "…"; every header word and every row's every cell whole on the
    lines of that row (a row is the lines that start with its benchmark and hold its system)."""
    lines = text.splitlines()
    assert lines[0].startswith(summary.experiment_root)
    assert all(len(line) <= width for line in lines[1:]), [line for line in lines if len(line) > width]
    assert "…" not in text
    columns = summary_columns(summary.rollups)
    if any(" / " in line for line in lines):  # records: the names on a line, then "header: value" lines
        assert {f"  {' '.join(c.header.split())}: " for c in columns[2:]} <= {line[:line.index(": ") + 2]
                                                                            for line in lines if ": " in line}
    else:
        assert {w for c in columns for w in c.header.split()} <= set(text.split())
    for i, r in enumerate(summary.rollups):
        row_lines = [line.split() for line in lines if line.split()[:2] == [r["benchmark"], r["system"]]]
        if not row_lines:  # records: the names on a line, then "header: value" lines
            at = lines.index(f"{r['benchmark']} / {r['system']}")
            cells = {line.rsplit(": ", 1)[1] for line in lines[at + 1:at + len(columns) - 1]}
            assert {c.cells[i] for c in columns[2:]} <= cells
            continue
        cells = {cell for parts in row_lines for cell in parts[2:]}
        assert {c.cells[i] for c in columns[2:]} <= cells, (r["system"], row_lines)


@pytest.mark.parametrize("width", [80, 100, 132, 200])
def test_the_summary_of_a_sweep_cuts_nothing_at_80_columns_and_wider(summary, width):
    text = rendered(summary, width)
    assert_nothing_cut(text, summary, width)
    assert rules(text) == (1 if width >= 100 else 2)  # at 80, the latency column goes to a second table


def test_a_narrow_terminal_gets_one_record_per_row(summary):
    text = rendered(summary, 40)
    assert_nothing_cut(text, summary, 40)
    assert "arith / representative_exchange" in text and "  tokens per run: " in text


def rollup(system: str, **extra: object) -> dict[str, object]:
    return {"benchmark": "workbench", "system": system, "n_tasks": 100, "n_runs": 300, "n_errors": 12,
            "success_rate": 0.3333333, "tokens_total": 123456.7, "cost_total": 0.01234567, "latency_p95": 456789.1,
            **extra}


def test_the_rollback_columns_go_to_another_table_and_nothing_is_cut():
    rolled = {"rolled_back": 150, "success_after_rollback": 0.61234, "rollback_tokens": 98765.4,
              "rollback_cost_usd": 0.00123}
    summary = ExperimentSummary(experiment_root="/tmp/e", rollups=[rollup("representative_exchange", **rolled),
                                                                   rollup("sas", **rolled)],
                                descriptors=[], economics=[], issues=[], n_runs=600, n_errors=24)
    for width in (80, 120):
        text = rendered(summary, width)
        assert_nothing_cut(text, summary, width)
        assert "0.012346" in text and "456,789" in text and "success after" in text


def test_off_a_terminal_the_table_is_one_table_with_one_line_headers(sweep, capsys):
    assert main(["summarize-experiment", "--experiment-root", str(sweep), "--no-report", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert rules(out) == 1 and "tokens per run" in out and "latency p95 (ms)" in out and "…" not in out


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a terminal of 80 columns")
def test_run_in_an_80_column_terminal_cuts_nothing(tmp_path):
    """The issue's check: `script -qc "stty cols 80; ..."` around the command a user runs."""
    python = sys.executable
    command = (f"stty cols 80; {python} {ROOT / 'main.py'} run --benchmark arith --systems {SYSTEMS} --model scripted "
               f"--task-limit 2 --runs-per-task 1 --inject-errors 0.5 --output-root {tmp_path} --experiment-id t")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    proc = subprocess.run(["script", "-qc", command, "/dev/null"], capture_output=True, text=True, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:]
    text = ANSI.sub("", proc.stdout).replace("\r", "")
    text = text[text.index(f"{tmp_path / 't'} ("):text.index("summaries: ")]
    summary = summarize_experiment(tmp_path / "t", plots=False)
    table = text[:text.index("arith: ")]  # the sentences follow the table; the terminal wraps them at words
    assert_nothing_cut(table, summary, 80)
    assert all(len(line) <= 80 for line in text.splitlines()[1:])
    assert len(re.findall(r"arith: \w+ solved \d+/\d+ runs vs sas", text)) == 2


def test_the_doctests_hold():
    assert doctest.testmod(descriptor.console_summary).failed == 0
    assert doctest.testmod(descriptor.console_table).failed == 0


def test_each_comparison_is_one_sentence_with_the_economics_interval_and_counts_from_the_run_files(sweep, summary):
    sentences = comparison_sentences(summary)
    economics = {r["system"]: r for r in json.loads((sweep / "economics.json").read_text())["rows"]}
    assert len(sentences) == len(economics) == 2
    settings = EconomicsSettings.for_unit("tokens")
    ratio = {r["system"]: r["token_ratio"] for r in paired_rows(summary.economics, summary.descriptors, settings)}
    for system, e in economics.items():
        said = next(s for s in sentences if s.startswith(f"arith: {system} solved "))
        solved = {}
        for name in (system, "sas"):
            results = [json.loads(p.read_text()) for p in (sweep / "arith" / name).rglob("run_*.result.json")]
            solved[name] = f"{sum(r['success'] for r in results)}/{len(results)}"
        assert said == (
            f"arith: {system} solved {solved[system]} runs vs sas {solved['sas']} ({100 * e['G']:+.1f} points, "
            f"95 % CI {100 * e['G_ci_low']:+.1f} to {100 * e['G_ci_high']:+.1f} over 4 tasks, too few to trust) "
            f"at {ratio[system]:.2g}× the tokens.")
        assert "dU=" not in said and "lambda" not in said


def test_the_sentence_drops_the_warning_from_ten_tasks_and_says_when_there_is_no_interval():
    row = {"benchmark": "gsm8k", "system": "debate", "baseline": "sas", "n_shared_tasks": 10, "G": -0.1,
           "G_ci_low": -0.2, "G_ci_high": 0.05, "token_ratio": 12.4}
    runs = [{"n_success": 3, "n_runs": 10}], [{"n_success": 4, "n_runs": 10}]
    assert descriptor.console_summary.comparison_sentence(row, *runs) == (
        "gsm8k: debate solved 3/10 runs vs sas 4/10 (-10.0 points, 95 % CI -20.0 to +5.0 over 10 tasks) "
        "at 12× the tokens.")
    row.update(G_ci_low=None, G_ci_high=None, n_shared_tasks=1, token_ratio=None)
    assert descriptor.console_summary.comparison_sentence(row, *runs) == (
        "gsm8k: debate solved 3/10 runs vs sas 4/10 (-10.0 points, no interval over 1 task) at an undefined "
        "multiple of the tokens.")
