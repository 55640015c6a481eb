"""Rollback: fork a failed scripted run from a top-level checkpoint and resume it."""

import hashlib
import json
import sqlite3

import langgraph
import pytest

from attribution.loaders import load_run
from attribution.rollback import choose_restart, rollback_one
from attribution.scorefile import ScoreRecord
from main import main

# Verified against this LangGraph minor version: forking a top-level checkpoint re-runs only the
# super-steps after it. Subgraph time travel re-runs whole subgraphs, so rollback never uses it.
PINNED_LANGGRAPH = "1.2"


def _langgraph_version() -> str:
    from importlib.metadata import version

    return version("langgraph")


def test_langgraph_version_is_the_pinned_one():
    assert _langgraph_version().startswith(PINNED_LANGGRAPH + "."), (
        f"rollback was verified on LangGraph {PINNED_LANGGRAPH}.x, found {_langgraph_version()}: "
        "re-run tests/test_rollback.py and update PINNED_LANGGRAPH")
    assert langgraph is not None


@pytest.fixture
def failed_run(tmp_path, monkeypatch):
    """One SAS arith run with a wrong step injected at step 1."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[models.default]\nprovider = "scripted"\nmodel = "scripted"\n[inject]\nstep = 1\nagent = "solver"\n')
    assert main(["run", "--config", str(cfg), "--benchmark", "arith", "--task-limit", "1", "--systems", "sas",
                 "--output-root", str(tmp_path), "--experiment-id", "e"]) == 0
    task_dir = next(p for p in (tmp_path / "e" / "arith" / "sas").iterdir() if p.is_dir())
    return task_dir


def _hashes(task_dir):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in task_dir.glob("run_0.*")}


def test_state_ids_are_top_level_checkpoints(failed_run):
    traj = load_run(failed_run, 0)
    con = sqlite3.connect(failed_run / "run_0.checkpoints.sqlite")
    rows = dict(con.execute("select checkpoint_id, checkpoint_ns from checkpoints").fetchall())
    assert all(rows[s.state_id] == "" for s in traj.steps)


async def test_rollback_before_the_injected_step_restores_success(failed_run):
    traj = load_run(failed_run, 0)
    assert traj.mistake_step == 1 and json.loads((failed_run / "run_0.result.json").read_text())["success"] is False
    before = _hashes(failed_run)
    scores = ScoreRecord(id=traj.id, n_steps=traj.n_steps,
                         step_scores=[1.0 if i == 1 else 0.1 for i in range(traj.n_steps)], mistake_step=1)
    rec = await rollback_one(traj, strategy="top1", scores=scores, calibration=None)
    assert rec.restart_step == 1 and rec.success and rec.covered
    assert rec.cost == pytest.approx((traj.n_steps - 1) / traj.n_steps)
    # only the steps after the fork were redone, numbered as in the original run
    events = [json.loads(x) for x in (failed_run / "run_0.rollback_0.trace.jsonl").read_text().splitlines()]
    redone = [e["payload"]["step_index"] for e in events if "step_index" in e["payload"]]
    assert redone == list(range(1, traj.n_steps))
    assert rec.steps_redone == traj.n_steps - 1
    after = _hashes(failed_run)
    assert {k: after[k] for k in before} == before  # the original run's files are untouched


async def test_rollback_after_the_injected_step_keeps_the_error(failed_run):
    traj = load_run(failed_run, 0)
    scores = ScoreRecord(id=traj.id, n_steps=traj.n_steps,
                         step_scores=[1.0 if i == 2 else 0.0 for i in range(traj.n_steps)], mistake_step=1)
    rec = await rollback_one(traj, strategy="top1", scores=scores, calibration=None)
    assert rec.restart_step == 2 and not rec.covered and not rec.success


async def test_full_restart_redoes_everything(failed_run):
    rec = await rollback_one(load_run(failed_run, 0), strategy="restart", scores=None, calibration=None)
    assert rec.restart_step == 0 and rec.cost == 1.0 and rec.success


def test_choose_restart_strategies():
    s = ScoreRecord(id="x", n_steps=4, step_scores=[0.1, 0.9, 0.9, 0.2])
    assert choose_restart("top1", s, None) == ([1], 1)  # ties go to the earliest step
    assert choose_restart("restart", s, None) == ([0, 1, 2, 3], 0)
    with pytest.raises(Exception, match="calibration"):
        choose_restart("conformal", s, None)
