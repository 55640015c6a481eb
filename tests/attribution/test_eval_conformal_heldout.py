"""The held-out protocol: a fixed, group-aware, subset-stratified split, and the script reporting on it."""

from __future__ import annotations

import json

import pytest

from attribution.conformal.heldout import check_split, heldout_split, read_split, write_split
from attribution.scorers.crossfit import group_key
from attribution.sources.trajectory import Step, Trajectory
from descriptor.errors import UserError
from tests.scripts_loader import load_script
from tests.shared_data import needs_who_and_when, who_and_when_dev

SCRIPT = load_script("eval_conformal_heldout")
DEV = who_and_when_dev()
needs_dev = needs_who_and_when


def traj(i: int, query: str, subset: str) -> Trajectory:
    return Trajectory(id=f"{subset}/{i}", query=query, subset=subset, mistake_step=0,
                      steps=[Step(index=0, agent="a", content="x")])


def test_split_keeps_questions_together_and_stratifies_by_subset():
    ts = [traj(i, f"q{i}", "ag") for i in range(40)] + [traj(i, f"h{i}", "hc") for i in range(20)]
    ts += [traj(100 + i, f"q{i}", "hc") for i in range(10)]  # ten questions asked in both subsets
    split = heldout_split(ts, fraction=0.3, seed=0)
    held = set(split.heldout_ids)
    assert sorted(split.train_ids + split.heldout_ids) == sorted(t.id for t in ts)
    for q in {group_key(t) for t in ts}:  # a question is on one side only
        assert len({t.id in held for t in ts if group_key(t) == q}) == 1
    # strata: 30 ag-only questions -> 9, 20 hc-only -> 6, 10 shared -> 3 (each two records)
    assert len(held) == 9 + 6 + 2 * 3
    assert heldout_split(ts, fraction=0.3, seed=0) == split
    assert heldout_split(list(reversed(ts)), fraction=0.3, seed=0) == split  # order of loading is irrelevant
    assert heldout_split(ts, fraction=0.3, seed=1) != split


def test_a_recorded_split_the_data_no_longer_reproduce_is_refused(tmp_path):
    ts = [traj(i, f"q{i}", "ag") for i in range(10)]
    path = tmp_path / "split.json"
    write_split(heldout_split(ts, seed=0), path)
    check_split(read_split(path), ts, path)
    with pytest.raises(UserError, match="do not reproduce"):
        check_split(read_split(path), ts + [traj(99, "new", "ag")], path)
    path.write_text("{}")
    with pytest.raises(UserError, match="not a held-out split"):
        read_split(path)


@needs_dev
def test_the_recorded_who_and_when_split_matches_the_data():
    from attribution.sources.loaders import load_who_and_when_dir

    ts = load_who_and_when_dir(DEV).trajectories
    split = read_split(SCRIPT.DEFAULT_SPLIT)
    check_split(split, ts, SCRIPT.DEFAULT_SPLIT)
    by_id = {t.id: t for t in ts}
    assert len(split.heldout_ids) == 37 and len(split.train_ids) == 86
    assert sum(by_id[i].subset == "hand_crafted" for i in split.heldout_ids) == 12


@needs_dev
def test_script_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "heldout.json"
    argv = ["--data-dir", str(DEV), "--scorers", "position", "--methods", "rf,trim,auto", "--alphas", "0.2",
            "--splits", "20", "--out", str(out)]
    assert SCRIPT.main(argv) == 0
    text = capsys.readouterr().out
    assert "position | all | 37 records" in text and "position | hand_crafted | 12 records" in text
    res = json.loads(out.read_text())
    assert res["n_heldout"] == 37 and res["n_dev"] == 86
    cell = res["results"]["position"]["all"]["0.2"]["trim"]
    assert cell["n"] == 37 and cell["splits"] == 20 and 0.0 <= cell["rr_mean"] <= 1.0
