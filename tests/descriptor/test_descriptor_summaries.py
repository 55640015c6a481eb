"""summarize-experiment on hand-made experiment directories, checked by the independent verifier."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import main
from descriptor.io import csv_float
from descriptor.plots import PLOT_FILES
from descriptor.summaries import SYSTEM_SUMMARY_FIELDS, summarize_experiment
from descriptor.task_descriptor import PipelineError
from descriptor.errors import UserError
from tests.descriptor_fixtures import build_experiment, ev, write_run

REPO = Path(__file__).resolve().parents[2]
VERIFY = REPO / "scripts" / "verify_descriptor.py"


def verify(root: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(VERIFY), str(root), *extra], check=False, capture_output=True, text=True, cwd=REPO)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> tuple[Path, object]:
    root = build_experiment(tmp_path_factory.mktemp("exp"), tasks=3, runs=4, seed=7)
    return root, summarize_experiment(root, plots=False)


def test_all_files_written(experiment):
    root, summary = experiment
    for system in ("sas", "debate"):
        for t in range(3):
            task = root / "arith" / system / f"t{t}"
            for name in ("descriptor.json", "descriptor.csv", "analysis.json", "task_summary.json"):
                assert (task / name).is_file(), task / name
        assert (root / "arith" / system / "summary.json").is_file()
        with open(root / "arith" / system / "summary.csv") as fh:
            rows = list(csv.DictReader(fh))
        # pass@5 and pass@8 are blank for every task (4 runs < k): blank cells, as the seed has it
        assert len(rows) == 3 and list(rows[0]) == list(SYSTEM_SUMMARY_FIELDS)
        assert all(r["pass_at_5"] == r["pass_at_8"] == "" for r in rows)
    for name in ("experiment_summary.json", "experiment_summary.csv", "economics.json", "economics.csv", "topology.json"):
        assert (root / name).is_file()
    assert summary.n_runs == 24 and len(summary.descriptors) == 6 and len(summary.rollups) == 2


def test_benchmark_rollups_beside_the_system_folders(experiment):
    root, _ = experiment
    per_benchmark = json.loads((root / "arith" / "summary.json").read_text())
    whole = json.loads((root / "experiment_summary.json").read_text())["benchmarks"]["arith"]
    assert per_benchmark == {"benchmark": "arith", **whole} and set(per_benchmark["systems"]) == {"sas", "debate"}
    with open(root / "arith" / "summary.csv") as fh:
        assert sorted(r["system"] for r in csv.DictReader(fh)) == ["debate", "sas"]


def test_blank_cells_in_csv(experiment):
    root, _ = experiment
    with open(root / "arith" / "sas" / "t0" / "descriptor.csv") as fh:
        row = next(csv.DictReader(fh))
    assert row["pass_at_5"] == row["pass_at_8"] == ""  # n = 4 < k: blank cells
    assert row["pass_at_3"] != "" and row["stability"] != ""
    assert row["Q1_success_rate"] == csv_float(json.loads((root / "arith" / "sas" / "t0" / "descriptor.json")
                                                          .read_text())["Q1_success_rate"])
    d = json.loads((root / "arith" / "debate" / "t0" / "descriptor.json").read_text())
    assert d["D1_tool_error_rate"] is None  # debate makes no tool calls


@pytest.mark.parametrize("value,text", [(5 / 6, "0.833333"), (5936.25, "5936.25"), (1.2345678e-05, "0.0000123457"),
                                        (1234567.891, "1234568"), (2.0, "2"), (0.0, "0"), (-0.05, "-0.05"),
                                        (0.1 + 0.2, "0.3"), (9.9999996, "10")])
def test_csv_floats_have_six_significant_digits_in_fixed_point(value, text):
    assert csv_float(value) == text
    assert float(text) == pytest.approx(value, rel=5e-6)


def test_independent_verifier_agrees(experiment):
    root, _ = experiment
    out = verify(root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK" in out.stdout


def test_verifier_catches_tampering(tmp_path):
    root = build_experiment(tmp_path, systems=("sas",), tasks=1, runs=2)
    summarize_experiment(root, plots=False)
    path = root / "arith" / "sas" / "t0" / "descriptor.json"
    d = json.loads(path.read_text())
    d["C2_tokens_total"] += 1e-6
    d["pass_at_3"] = 0.0  # must be blank for n = 2
    path.write_text(json.dumps(d))
    out = verify(root)
    assert out.returncode == 1
    assert "C2_tokens_total" in out.stdout and "pass_at_3: expected blank" in out.stdout


def test_idempotent(tmp_path):
    root = build_experiment(tmp_path, tasks=2, runs=3, seed=3)
    summarize_experiment(root, plots=False)
    names = ["experiment_summary.json", "experiment_summary.csv", "economics.json", "topology.json",
             "arith/sas/summary.csv", "arith/debate/t1/analysis.json"]
    first = {n: (root / n).read_bytes() for n in names}
    summarize_experiment(root, plots=False)
    assert {n: (root / n).read_bytes() for n in names} == first


def test_analysis_bottlenecks_and_stalls(experiment):
    root, _ = experiment
    a = json.loads((root / "arith" / "debate" / "t0" / "analysis.json").read_text())
    assert a["bottlenecks"]["top_stage_by_tokens"] == "act"
    assert a["bottlenecks"]["top_actor_by_tokens"] in {"a", "b"}
    stalls = a["loop_stalls"]
    assert stalls["count"] == sum(stalls["by_reason"].values())
    assert set(stalls["by_reason"]) <= {"no_progress"}
    assert len(a["evaluation"]["runs"]) == 4
    assert "descriptor" not in a  # descriptor.json beside it holds the descriptor; no second copy (issue 33)


def test_truncated_last_line_reported_and_rest_summarised(tmp_path, capsys):
    root = build_experiment(tmp_path, systems=("sas",), tasks=2, runs=3)
    damaged = root / "arith" / "sas" / "t1" / "run_2.trace.jsonl"
    text = damaged.read_text()
    damaged.write_text(text[: len(text) - 40])  # cut the last line mid-object
    n_lines = len(damaged.read_text().splitlines())
    code = main.main(["summarize-experiment", "--experiment-root", str(root), "--no-plots"])
    assert code == 0
    err = capsys.readouterr().err
    assert f"arith/sas/t1/run_2.trace.jsonl:{n_lines}" in err and "damaged_trace" in err
    d = json.loads((root / "arith" / "sas" / "t1" / "descriptor.json").read_text())
    assert d["n_runs"] == 3  # included with the valid prefix
    summary = json.loads((root / "experiment_summary.json").read_text())
    assert summary["issues"][0]["path"] == "arith/sas/t1/run_2.trace.jsonl"
    assert summary["issues"][0]["included"] is True
    assert verify(root).returncode == 0


def test_damage_in_the_middle_skips_the_run(tmp_path):
    root = build_experiment(tmp_path, systems=("sas",), tasks=1, runs=3)
    path = root / "arith" / "sas" / "t0" / "run_1.trace.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:10]
    path.write_text("\n".join(lines) + "\n")
    s = summarize_experiment(root, plots=False)
    assert s.descriptors[0]["n_runs"] == 2
    assert [(i.kind, i.line, i.included) for i in s.issues] == [("damaged_trace", 2, False)]
    assert verify(root).returncode == 0


def test_unfinished_run_skipped(tmp_path):
    task = tmp_path / "arith" / "sas" / "t0"
    write_run(task, 0, [ev("a", "act", tin=5, content="x")], success=True)
    write_run(task, 1, [ev("a", "act", tin=7, content="y")], success=False, finished=False)
    s = summarize_experiment(tmp_path, plots=False)
    assert s.n_runs == 1 and s.descriptors[0]["C2_tokens_total"] == 5.0
    assert [i.kind for i in s.issues] == ["unfinished"]


def test_q1_eval_mismatch_is_a_pipeline_error(tmp_path):
    task = tmp_path / "arith" / "sas" / "t0"
    write_run(task, 0, [ev("a", "act", content="x")], success=True)
    write_run(task, 1, [ev("a", "act", content="y")], success=False, eval_success=True)
    with pytest.raises(PipelineError, match="Q1_success_rate=0.5.*eval_success_rate=1.0"):
        summarize_experiment(tmp_path, plots=False)
    assert main.main(["summarize-experiment", "--experiment-root", str(tmp_path), "--no-plots"]) == 2


def test_q2_follows_eval_completion_when_present(tmp_path):
    task = tmp_path / "arith" / "sas" / "t0"
    write_run(task, 0, [ev("a", "act", content="x")], success=False, completion=True, eval_extra={"completion": False})
    with pytest.raises(PipelineError, match="Q2_completion_rate"):
        summarize_experiment(tmp_path, plots=False)


def test_analysis_runs_carry_the_eval_verdicts(tmp_path):
    # result.json and eval.json disagree per run but not on average, so the rates still match.
    task = tmp_path / "arith" / "sas" / "t0"
    write_run(task, 0, [ev("a", "act", content="x")], success=False, completion=True, eval_extra={"completion": False})
    write_run(task, 1, [ev("a", "act", content="y")], success=False, completion=False, eval_extra={"completion": True})
    summarize_experiment(tmp_path, plots=False)
    runs = json.loads((task / "analysis.json").read_text())["evaluation"]["runs"]
    assert [(r["success"], r["completion"]) for r in runs] == [(False, False), (False, True)]
    assert verify(tmp_path).returncode == 0
    analysis = json.loads((task / "analysis.json").read_text())
    analysis["evaluation"]["runs"][0]["completion"] = True  # result.json's value, not eval.json's
    (task / "analysis.json").write_text(json.dumps(analysis))
    out = verify(tmp_path)
    assert out.returncode != 0 and "analysis.json run 0: completion: expected False (eval.json), got True" in out.stdout + out.stderr


def test_empty_root_and_missing_root(tmp_path):
    with pytest.raises(UserError, match="no finished run"):
        summarize_experiment(tmp_path)
    with pytest.raises(UserError, match="not a directory"):
        summarize_experiment(tmp_path / "nope")


def test_zero_step_run_and_single_task_single_system_with_plots(tmp_path):
    task = tmp_path / "arith" / "sas" / "t0"
    write_run(task, 0, [], success=False, completion=False)
    s = summarize_experiment(tmp_path, plots=True)
    d = s.descriptors[0]
    assert d["P1_steps_total"] == 0.0 and d["P2_backtrack_rate"] == 0.0 and d["tokens_cv"] is None
    assert s.economics == []  # no MAS to compare
    for name in PLOT_FILES:
        assert (tmp_path / "plots" / name).stat().st_size > 0
    assert verify(tmp_path).returncode == 0


@pytest.mark.slow
def test_scripted_experiment_end_to_end(tmp_path):
    """The issue's "What must show": scripted sas (+ debate when present), 3 tasks x 4 runs, verified independently."""
    from mas.systems import SYSTEMS

    systems = ",".join(s for s in ("sas", "debate") if s in SYSTEMS)
    code = main.main(["run", "--benchmark", "arith", "--task-limit", "3", "--runs-per-task", "4", "--systems", systems,
                      "--model", "scripted", "--output-root", str(tmp_path), "--experiment-id", "e", "--seed", "1"])
    assert code == 0
    root = tmp_path / "e"
    s = summarize_experiment(root)
    assert s.n_runs == 12 * len(systems.split(","))
    out = verify(root)
    assert out.returncode == 0, out.stdout


def test_a_second_summary_reads_only_the_tasks_whose_runs_changed(tmp_path, monkeypatch):
    root = build_experiment(tmp_path / "exp", tasks=3, runs=2)
    first = summarize_experiment(root, plots=False)
    import descriptor.summaries as summaries

    read: list[str] = []
    real = summaries.load_task_runs
    monkeypatch.setattr(summaries, "load_task_runs", lambda d, *a, **k: read.append(d.name) or real(d, *a, **k))
    again = summarize_experiment(root, plots=False)
    assert read == [] and again.rollups == first.rollups and again.descriptors == first.descriptors
    # a run redone (its result rewritten) changes only its task
    write_run(root / "arith" / "sas" / "t1", 1, [ev("solver", "finalize", content="42", tin=7)], success=True)
    changed = summarize_experiment(root, plots=False)
    assert read == ["t1"] and changed.rollups != first.rollups
    # a deleted task file is rewritten
    (root / "arith" / "debate" / "t0" / "analysis.json").unlink()
    summarize_experiment(root, plots=False)
    assert read == ["t1", "t0"] and (root / "arith" / "debate" / "t0" / "analysis.json").is_file()


def test_forked_workers_write_the_same_summaries(tmp_path):
    """In a fresh single-threaded interpreter, task directories read by forked workers give byte-identical files."""
    root = build_experiment(tmp_path / "exp", tasks=3, runs=2, seed=5)
    code = ("import sys, shutil; from pathlib import Path; from descriptor import summaries\n"
            "from descriptor.parallel import usable_workers\n"
            "assert usable_workers() > 1, 'would not fork'\n"
            "root = Path(sys.argv[1])\n"
            "for name, n in (('one', 10**9), ('many', 0)):\n"
            "    copy = root.parent / name\n"
            "    shutil.copytree(root, copy)\n"
            "    summaries.PARALLEL_MIN_TASKS = n\n"
            "    summaries.summarize_experiment(copy, plots=False)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, cwd=REPO, timeout=120)
    if "would not fork" in proc.stderr:
        pytest.skip("one usable core: nothing forks")
    assert proc.returncode == 0, proc.stderr[-2000:]
    one, many = tmp_path / "one", tmp_path / "many"
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert any(p.name == "descriptor.json" for p in files)
    for rel in files:
        assert (one / rel).read_bytes() == (many / rel).read_bytes(), rel
