"""A summary says when an experiment's runs ran with more than one config or version of the code."""

from __future__ import annotations

import json
from pathlib import Path

from descriptor.summaries import summarize_experiment
from main import main


def sweep(out: Path, *extra: str, tasks: int = 2) -> Path:
    assert main(["run", "--benchmark", "arith", "--task-limit", str(tasks), "--systems", "sas,debate", "--model",
                 "scripted", "--output-root", str(out), "--experiment-id", "e", "--progress", "none", *extra]) == 0
    return out / "e"


def test_a_resume_with_another_config_after_the_manifest_went_is_named_by_the_summary(tmp_path, capsys):
    """The manifest's guard refuses a resume with another config; with the manifest moved away (as the advice for a
    damaged one says) the resume ran, and the summary mixed 3-debater and 2-debater runs without a word."""
    root = sweep(tmp_path)
    assert summarize_experiment(root).notes == []
    (root / "manifest.json").unlink()
    sweep(tmp_path, "--set", "mas.agents=2", tasks=3)
    capsys.readouterr()
    summary = summarize_experiment(root)
    [note] = summary.notes
    assert "the runs ran with 2 different configs" in note and str(root / "configs") in note
    assert json.loads((root / "experiment_summary.json").read_text())["notes"] == [note]
    assert main(["summarize-experiment", "--experiment-root", str(root)]) == 0
    assert f"warning: {note}" in capsys.readouterr().err


def test_settings_that_change_no_result_are_no_other_config(tmp_path):
    root = sweep(tmp_path)
    sweep(tmp_path, "--concurrency", "1", tasks=3)  # allowed on resume: it changes how, not what
    assert len(list((root / "configs").glob("*.json"))) == 2 and summarize_experiment(root).notes == []


def test_invocations_on_different_code_are_named_by_the_summary(tmp_path):
    root = sweep(tmp_path)
    sweep(tmp_path, tasks=3)
    manifest = json.loads((root / "manifest.json").read_text())
    commits = [inv["git_commit"] for inv in manifest["invocations"]]
    assert len(commits) == 2 and commits[0] == commits[1]  # each invocation records the code it ran
    assert summarize_experiment(root).notes == []
    manifest["invocations"][0]["git_commit"] = "89abcdef"
    manifest["invocations"][1]["git_commit"] = "0123abc+dirty"
    (root / "manifest.json").write_text(json.dumps(manifest))
    [note] = summarize_experiment(root).notes
    assert "ran on 2 versions of the code" in note and "0123abc+dirty" in note


def test_configs_that_differ_only_in_what_a_resume_may_change_are_one_setup(tmp_path):
    """The notes follow the resume guard's one rule (descriptor.run_config.config_differences): a resume that
    raised the sweep's spending limit or changed the cache is the same setup; they had their own list, which
    called those two configs."""
    from descriptor.provenance import provenance_notes

    configs = tmp_path / "configs"
    configs.mkdir()
    base = {"seed": 0, "mas": {"agents": 3}, "cache": {"mode": "off"}, "limits": {"sweep_cost_usd": None}}
    (configs / "a.json").write_text(json.dumps(base))
    (configs / "b.json").write_text(json.dumps({**base, "cache": {"mode": "read_write"}, "concurrency": 1,
                                                "limits": {"sweep_cost_usd": 5.0}}))
    assert provenance_notes(tmp_path) == []
    (configs / "c.json").write_text(json.dumps({**base, "mas": {"agents": 2}}))
    [note] = provenance_notes(tmp_path)
    assert "2 different configs (a.json, b.json; c.json)" in note
