"""``summarize-experiment`` reads each run's files once for its summaries and its report (issue 33)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import main
from descriptor import run_files
from tests.descriptor_fixtures import build_experiment


def test_summaries_and_report_read_each_runs_result_and_eval_once(tmp_path, monkeypatch, capsys):
    root = build_experiment(tmp_path / "e", tasks=2, runs=2)
    reads: Counter[str] = Counter()
    real = run_files.read_record

    def counting(path: Path, model):
        reads[str(Path(path).relative_to(root))] += 1
        return real(path, model)

    monkeypatch.setattr(run_files, "read_record", counting)
    assert main.main(["summarize-experiment", "--experiment-root", str(root)]) == 0
    assert (root / "report" / "index.html").is_file() and (root / "experiment_summary.json").is_file()
    results = {k: n for k, n in reads.items() if k.endswith((".result.json", ".eval.json"))}
    assert len(results) == 2 * 2 * 2 * 2  # systems x tasks x runs x (result, eval)
    assert set(results.values()) == {1}
    assert "report: " in capsys.readouterr().out
