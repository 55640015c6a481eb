"""Bad input that was run anyway or ended in a traceback: each is refused in one line naming the option, exit 2,
before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from main import main

ROUTES = """
[models.default]
provider = "scripted"
model = "scripted"
[models.ok1]
provider = "scripted"
model = "scripted"
[models.ok2]
provider = "scripted"
model = "scripted"
[models.echo]
provider = "scripted"
model = "scripted"
"""

PLAN = ["plan", "--baseline-rate", "0.5", "--effect", "0.1"]


@pytest.mark.parametrize("argv, says", [
    ([*PLAN, "--alpha", "0"], "--alpha: expected a number in (0, 1)"),
    ([*PLAN, "--alpha", "1"], "--alpha: expected a number in (0, 1)"),
    ([*PLAN, "--power", "1"], "--power: expected a number in (0, 1)"),
    ([*PLAN, "--power", "0"], "--power: expected a number in (0, 1)"),
])
def test_plan_refuses_a_level_or_power_of_0_or_1(capsys, argv, says):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def _run(tmp_path: Path, *extra: str, benchmark: str = "arith") -> list[str]:
    return ["run", "--benchmark", benchmark, "--systems", "sas", "--task-limit", "2", "--progress", "none",
            "--output-root", str(tmp_path / "out"), "--experiment-id", "e", *extra]


@pytest.mark.parametrize("extra, says", [
    (["--model", "scripted", "--task-ids", ""], "--task-ids '': no task id given"),
    (["--model", "scripted", "--task-ids", ",,,"], "--task-ids ',,,': no task id given"),
    (["--model", "scripted", "--task-ids", "lists/ids.txt"], "--task-ids lists/ids.txt: no such file"),
    (["--model", "scripted", "--task-ids", "./ids"], "--task-ids ./ids: no such file"),
    (["--model", "scripted", "--models", ""], "--models '': expected route names"),
    (["--model", "scripted", "--models", ","], "--models ',': expected route names"),
    (["--models", "ok1,,ok2"], "--models 'ok1,,ok2': expected route names"),
    (["--model", "echo", "--models", "ok1,ok2"], "--model echo and --models ok1,ok2: --model puts one route"),
    (["--model", "scripted", "--stratify", "ops"], "--stratify ops: arith task arith_0_0000 holds a list there"),
])
def test_run_refuses_empty_or_missing_selections_and_a_model_matrix_beside_one_model(tmp_path, capsys, extra, says):
    config = tmp_path / "routes.toml"
    config.write_text(ROUTES)
    capsys.readouterr()
    assert main(_run(tmp_path, "--config", str(config), *extra)) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bench_name, field", [("workbench", "query"), ("gsm8k", "index"), ("workbench", "domains")])
def test_stratifying_by_a_unique_or_list_valued_field_is_refused(tmp_path, capsys, bench_name, field):
    capsys.readouterr()
    assert main(_run(tmp_path, "--model", "scripted", "--stratify", field, benchmark=bench_name)) == 2
    err = capsys.readouterr().err
    assert f"--stratify {field}:" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_a_task_id_given_plainly_is_still_an_id(tmp_path, capsys):
    capsys.readouterr()
    assert main(_run(tmp_path, "--model", "scripted", "--task-ids", "arith_0_0001", benchmark="arith")) == 0
    assert (tmp_path / "out" / "e").is_dir()
