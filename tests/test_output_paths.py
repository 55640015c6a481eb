"""An output path that cannot be written as given is bad input: one line naming it, exit 2, not a traceback."""

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
    (["score-steps", "--scorer", "position"], "afile/s.jsonl", "afile/s.jsonl: part of this path is a file"),
    (["attribute", "--method", "random"], "afile/x", "part of this path is a file"),
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
