"""A run's config is stored once per experiment, named by its SHA-256, and every reader still gets it (issue 33)."""

import hashlib
import json
import shutil

import pytest

from attribution.rollback.restart import rollback_one
from attribution.sources.loaders import load_run
from descriptor.layout import RunPaths
from descriptor.run_config import config_path, read_metadata_with_config, run_config
from descriptor.run_files import RunFileError, read_metadata
from main import main


def sweep(tmp_path, *extra, systems="sas,debate", tasks=2):
    assert main(["run", "--benchmark", "arith", "--task-limit", str(tasks), "--systems", systems, "--model",
                 "scripted", "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none",
                 *extra]) == 0
    return tmp_path / "e"


@pytest.fixture
def failed_run(tmp_path):
    """Run 0 of one SAS arith run with a wrong step injected at step 1 (its checkpoints kept)."""
    root = sweep(tmp_path, "--set", "inject.step=1", "--set", "inject.agent=solver", systems="sas", tasks=1)
    return RunPaths(next(p for p in (root / "arith" / "sas").iterdir() if p.is_dir()), 0)


def test_runs_name_their_config_by_hash_and_the_experiment_stores_it_once(tmp_path):
    root = sweep(tmp_path)
    metas = sorted(root.rglob("run_0.metadata.json"))
    assert len(metas) == 4
    shas = set()
    for p in metas:
        raw = json.loads(p.read_text())
        assert raw.get("config") is None and raw["config_sha256"]  # no inline copy of the config any more
        shas.add(raw["config_sha256"])
    (sha,) = shas  # every run of the sweep ran on one config: one file
    (stored,) = (root / "configs").iterdir()
    assert stored == config_path(root, sha) and hashlib.sha256(stored.read_bytes()).hexdigest() == sha
    meta = read_metadata_with_config(RunPaths.parse(metas[0]))
    assert meta.config == json.loads(stored.read_text()) and meta.config["models"]["default"]["provider"] == "scripted"


def test_a_rollback_of_a_run_whose_config_file_is_missing_exits_2_naming_the_file(failed_run, capsys):
    sha = read_metadata(failed_run).config_sha256
    missing = config_path(failed_run.experiment_root, sha)
    missing.unlink()
    assert main(["rollback", "--run-dir", str(failed_run.prefix), "--strategy", "restart"]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "config file not found" in err


@pytest.mark.parametrize("command", ["label-failures", "rollback-experiment"])
def test_labelling_or_rolling_back_an_experiment_whose_config_file_is_missing_exits_2_before_any_replay(
        failed_run, capsys, command):
    """Every replay would fail on the same missing file: the command says so once, naming it, and writes nothing
    (before, label-failures wrote a label per run saying each replay had ended in an error, and exited 0)."""
    root = failed_run.experiment_root
    missing = config_path(root, read_metadata(failed_run).config_sha256)
    missing.unlink()
    out = root.parent / "labels.jsonl"
    args = ["--out", str(out)] if command == "label-failures" else ["--strategies", "restart", "--out", str(out)]
    assert main([command, "--experiment-root", str(root), *args]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "config file not found" in err
    assert not out.exists() and failed_run.rollbacks() == []


def test_a_config_file_that_no_longer_has_its_hash_is_refused_naming_it(failed_run):
    meta = read_metadata(failed_run)
    path = config_path(failed_run.experiment_root, meta.config_sha256)
    path.write_text(path.read_text().replace('"seed":0', '"seed":1'))
    with pytest.raises(RunFileError, match=f"{path}: config file changed"):
        run_config(failed_run, meta)


async def test_a_run_with_its_config_inline_still_resumes(failed_run):
    """Metadata written before issue 33 holds the config itself and no hash: rollback reads it from there."""
    raw = json.loads(failed_run.metadata.read_text())
    raw["config"] = json.loads(config_path(failed_run.experiment_root, raw.pop("config_sha256")).read_text())
    failed_run.metadata.write_text(json.dumps(raw, indent=2))
    shutil.rmtree(failed_run.experiment_root / "configs")
    rec = await rollback_one(load_run(failed_run.task_dir, 0), strategy="restart", scores=None, calibration=None)
    assert rec.status == "finished" and rec.success and rec.restart_step == 0


def test_a_config_hash_that_is_no_hash_is_refused_before_any_file_is_opened(failed_run):
    """The hash becomes a file name: a metadata naming ``../../x`` would otherwise read outside the experiment."""
    raw = json.loads(failed_run.metadata.read_text())
    failed_run.metadata.write_text(json.dumps({**raw, "config_sha256": "../../../etc/passwd"}))
    with pytest.raises(RunFileError, match=f"{failed_run.metadata}: field config_sha256"):
        read_metadata_with_config(failed_run)


def test_a_run_whose_task_id_holds_a_secret_value_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    from main import main

    monkeypatch.setenv("TASK_NOTE", "arith_0_0001x")  # named like nothing secret, and not shaped like a key
    monkeypatch.setenv("MY_TOKEN", "arith_0_0001")  # named like a secret: its value is one, and a task id holds it
    argv = ["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--task-limit", "2",
            "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "names a value of environment variable MY_TOKEN" in err and "arith_0_0001" not in err
    assert not (tmp_path / "e").exists()
    monkeypatch.delenv("MY_TOKEN")
    assert main(argv) == 0


def test_a_sweeps_config_is_dumped_once_yet_a_deleted_file_or_another_config_is_stored_again(tmp_path, monkeypatch):
    """The sweep stores its config once per config object (not per run), and still writes the file again when it
    is gone, and another config object (a model-matrix unit's) gets a file of its own hash."""
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep import metadata

    dumps = []
    real = metadata.store_config
    monkeypatch.setattr(metadata, "store_config", lambda root, data: dumps.append(data) or real(root, data))
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted")})
    shas = {metadata.stored_config(tmp_path, cfg) for _ in range(5)}
    assert len(dumps) == 1 and len(shas) == 1
    (sha,) = shas
    config_path(tmp_path, sha).unlink()
    assert metadata.stored_config(tmp_path, cfg) == sha and config_path(tmp_path, sha).is_file()
    other = cfg.model_copy(update={"seed": cfg.seed + 1})
    other_sha = metadata.stored_config(tmp_path, other)
    assert other_sha != sha and json.loads(config_path(tmp_path, other_sha).read_text())["seed"] == cfg.seed + 1
    assert len(dumps) == 3
