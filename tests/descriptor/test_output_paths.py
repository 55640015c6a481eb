"""Where a command writes (:mod:`descriptor.outputs`): an output path that cannot be written as given, that is
one of the command's own inputs, lies in an experiment's files, or holds another kind of file is bad input: one
line naming it, exit 2, nothing written, every command the same."""

import json
from pathlib import Path

import pytest

from main import main


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--task-limit", "2", "--output-root", str(root), "--experiment-id", "e", "--progress", "none"]) == 0
    return root / "e"


@pytest.mark.parametrize("command, out, says", [
    (["score-steps", "--scorer", "position"], "adir", "adir: is a directory; expected a file path"),
    (["score-steps", "--scorer", "position"], "afile/s.jsonl", "afile: is a file; expected a directory"),
    (["attribute", "--method", "random"], "afile/x", "afile: is a file; expected a directory"),
    (["report"], "afile/rep", "afile: is a file; expected a directory"),
])
def test_an_output_path_that_cannot_be_written_is_refused_in_one_line(sweep, tmp_path, monkeypatch, capsys,
                                                                      command, out, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    source = ["--experiment-root", str(sweep)] if command == ["report"] else ["--runs-dir", str(sweep)]
    capsys.readouterr()
    assert main([*command, *source, "--out", out]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "afile").read_text() == "x" and not any((tmp_path / "adir").iterdir())


def _inputs(sweep: Path, tmp_path: Path) -> dict[str, Path]:
    """A score file and a calibration to feed the commands that read them (made once per test directory)."""
    scores, cal = tmp_path / "in" / "scores.jsonl", tmp_path / "in" / "cal.json"
    if not scores.exists():
        scores.parent.mkdir()
        assert main(["score-steps", "--runs-dir", str(sweep), "--scorer", "position", "--out", str(scores)]) == 0
        assert main(["calibrate", "--scores", str(scores), "--method", "vcp", "--alpha", "0.5", "--out", str(cal)]) == 0
    return {"scores": scores, "cal": cal}


def _commands(sweep: Path, ins: dict[str, Path]) -> dict[str, list[str]]:
    """Every command with an output path, without its ``--out``."""
    return {
        "label-failures": ["label-failures", "--experiment-root", str(sweep)],
        "score-steps": ["score-steps", "--runs-dir", str(sweep), "--scorer", "position"],
        "attribute": ["attribute", "--runs-dir", str(sweep), "--method", "random"],
        "calibrate": ["calibrate", "--scores", str(ins["scores"]), "--method", "vcp", "--alpha", "0.5"],
        "conformal": ["conformal", "--scores", str(ins["scores"]), "--method", "vcp", "--alpha", "0.5", "--splits",
                      "2", "--no-plots"],
        "predict-set": ["predict-set", "--calibration", str(ins["cal"]), "--scores", str(ins["scores"])],
        "rollback-experiment": ["rollback-experiment", "--experiment-root", str(sweep), "--strategies", "restart"],
        "report": ["report", "--experiment-root", str(sweep)],
        "studio-config": ["studio-config"],
        "cache-export": ["cache", "export", "--path", str(ins["scores"])],  # not reached: the input check is first
    }


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["label-failures", "score-steps", "attribute", "calibrate", "conformal",
                                  "predict-set", "rollback-experiment", "report", "studio-config"])
def test_no_command_writes_onto_a_config_an_experiments_files_or_its_own_input(sweep, tmp_path, capsys, name):
    ins = _inputs(sweep, tmp_path)
    command = _commands(sweep, ins)[name]
    config = tmp_path / "experiment.toml"
    config.write_text('concurrency = 1\n[models.default]\nprovider = "scripted"\n')
    targets = [config, sweep / "manifest.json", sweep / "runs.jsonl", sweep / "arith" / "sas" / "new.jsonl"]
    if name in ("calibrate", "conformal", "predict-set"):
        targets.append(ins["scores"])  # their own input
    if name == "predict-set":
        targets.append(ins["cal"])
    before, inputs_before = _snapshot(sweep), _snapshot(tmp_path / "in")
    for out in targets:
        capsys.readouterr()
        assert main([*command, "--out", str(out)]) == 2, out
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"--out {out}" in err, err
    assert _snapshot(sweep) == before and _snapshot(tmp_path / "in") == inputs_before
    assert config.read_text().startswith("concurrency = 1")
    assert main(["run", "--benchmark", "arith", "--systems", "sas", "--model", "scripted", "--inject-errors", "1.0",
                 "--task-limit", "2", "--output-root", str(sweep.parent), "--experiment-id", "e",
                 "--progress", "none"]) == 0  # the experiment is still resumable: nothing of it was touched


def test_label_failures_writes_its_own_kind_of_file_and_may_write_under_the_experiments_attribution(sweep,
                                                                                                   tmp_path):
    out = sweep / "attribution" / "labels.jsonl"
    assert main(["label-failures", "--experiment-root", str(sweep), "--out", str(out)]) == 0
    first = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert first and all("decisive_step" in lab for lab in first)
    again = tmp_path / "labels.jsonl"
    again.write_text("")  # an empty file holds nothing to lose
    assert main(["label-failures", "--experiment-root", str(sweep), "--out", str(again)]) == 0
    assert main(["label-failures", "--experiment-root", str(sweep), "--out", str(again)]) == 0  # its own kind
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
