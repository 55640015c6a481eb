"""The notebook face: keyword options checked by the CLI's parser, run files as DataFrames, JSON Schema files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from descriptor.errors import UserError
from descriptor.frames import load_events, load_runs, to_parquet
from descriptor.schemas import DEFAULT_DIR, stale
from mas.notebook import run_options

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "experiment"


def test_keyword_options_mean_what_the_clis_options_mean():
    args = run_options(benchmark=["arith", "gsm8k"], systems=("sas", "debate"), task_limit=2, shuffle=True,
                       set={"mas.max_rounds": 2, "models.default.model": "x"}, model="scripted")
    assert args.benchmark == ["arith", "gsm8k"] and args.systems == "sas,debate" and args.task_limit == 2
    assert args.shuffle and args.model == "scripted"
    assert args.set == ["mas.max_rounds=2", 'models.default.model="x"']
    assert run_options().task_limit == 3  # the CLI's defaults


@pytest.mark.parametrize(("options", "message"), [
    ({"task_limt": 2}, r"unknown option 'task_limt'; known: .*task_limit"),
    ({"task_limit": "two"}, r"--task-limit: invalid int value: 'two'"),
    ({"executor": "spark"}, r"--executor: invalid choice: 'spark'"),
])
def test_a_wrong_keyword_option_is_a_user_error_naming_it(options, message):
    with pytest.raises(UserError, match=message):
        run_options(**options)


def test_load_runs_and_load_events_hold_every_run_and_every_event_of_an_experiment(tmp_path):
    runs = load_runs(GOLDEN)
    results = sorted(GOLDEN.glob("*/*/*/run_*.result.json"))
    assert len(runs) == len(results) and set(runs.system) == {"sas", "supervisor", "debate", "orchestrator"}
    first = json.loads(results[0].read_text(encoding="utf-8"))
    row = runs.set_index("run_id").loc[first["run_id"]]
    assert row["success"] == first["success"] and row["tokens_total"] == first["tokens_total"]
    events = load_events(GOLDEN)
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in GOLDEN.glob("*/*/*/run_*.trace.jsonl"))
    assert len(events) == lines
    steps = events.dropna(subset=["step_index"])
    assert (steps.groupby("run_id")["step_index"].min() == 0).all()  # every run's trajectory starts at step 0
    assert all(json.loads(p) is not None for p in events.payload.head(20))
    written = to_parquet(GOLDEN, tmp_path)
    assert [p.name for p in written] == ["runs.parquet", "events.parquet"]
    assert len(pd.read_parquet(written[1])) == lines


def test_an_experiment_directory_that_is_not_there_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such experiment directory"):
        load_runs(tmp_path / "missing")


def test_the_json_schema_files_in_docs_follow_the_record_models():
    assert stale(DEFAULT_DIR) == []


@pytest.mark.slow
def test_the_readme_notebook_example_runs(tmp_path, monkeypatch, capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## From a notebook", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "debate" in out and "sas" in out
    assert (tmp_path / "artifacts" / "notebook" / "report" / "index.html").is_file()
