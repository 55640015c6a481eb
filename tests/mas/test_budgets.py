"""Budgets (issue 28) through the CLI on the scripted model: a run stopped by ``limits.tokens`` is a finished run
named as capped and counted; a sweep stopped by ``limits.sweep_cost_usd`` exits 3 and a resume with a higher limit
finishes it without redoing a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, *args: str, cfg: Path | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(ROOT / "main.py"), "run", "--benchmark", "arith", "--output-root", str(tmp_path / "out"),
           "--progress", "none", *args]
    cmd += ["--config", str(cfg)] if cfg else ["--model", "scripted"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)


def results(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("run_*.result.json"))]


def test_a_token_budget_stops_debate_runs_within_one_call_and_the_summary_counts_them(tmp_path):
    unlimited = run(tmp_path, "--systems", "debate", "--task-limit", "3", "--experiment-id", "free")
    assert unlimited.returncode == 0, unlimited.stderr[-2000:]
    free = results(tmp_path / "out" / "free")
    limit = 1500
    assert max(r["tokens_total"] for r in free) > limit, "the budget must bind for the test to mean anything"

    proc = run(tmp_path, "--systems", "debate", "--task-limit", "3", "--experiment-id", "capped",
               "--set", f"limits.tokens={limit}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    capped = results(tmp_path / "out" / "capped")
    root = tmp_path / "out" / "capped"
    per_call = max(e["token_in"] + e["token_out"] for p in root.rglob("run_*.trace.jsonl")
                   for e in map(json.loads, p.read_text().splitlines()))
    stopped = [r for r in capped if r["limit"] == "tokens"]
    assert stopped, "no run was stopped by the budget"
    for r in capped:
        assert r["status"] == "finished", r  # a budget is the system's outcome, never an infrastructure error
        assert r["tokens_total"] <= limit + per_call, r
    assert all(not r["completion"] and not r["success"] for r in stopped)
    (row,) = json.loads((root / "experiment_summary.json").read_text())["rollups"]
    assert row["limits_hit"] == {"tokens": len(stopped)} and row["n_errors"] == 0
    assert f"{len(stopped)} at limits.tokens" in proc.stdout


def test_a_sweep_stops_at_its_spending_limit_and_a_resume_with_a_higher_limit_finishes_it(tmp_path):
    cfg = tmp_path / "priced.toml"
    cfg.write_text('concurrency = 1\n[models.default]\nprovider = "scripted"\nmodel = "scripted"\n'
                   "price_input_per_1m = 100.0\nprice_output_per_1m = 100.0\n")
    args = ("--systems", "sas", "--task-limit", "6", "--experiment-id", "paid")
    first = run(tmp_path, *args, "--set", "limits.sweep_cost_usd=0.01", cfg=cfg)
    assert first.returncode == 3, first.stderr[-2000:]
    assert "limits.sweep_cost_usd" in first.stderr
    root = tmp_path / "out" / "paid"
    done = results(root)
    assert 0 < len(done) < 6
    per_run = max(r["cost_total_usd"] for r in done)
    assert sum(r["cost_total_usd"] for r in done) < 0.01 + per_run  # in flight at the limit: one run (concurrency 1)
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["status"] == "over_budget"
    mtimes = {p: p.stat().st_mtime_ns for p in root.rglob("run_*.result.json")}

    again = run(tmp_path, *args, "--set", "limits.sweep_cost_usd=10", cfg=cfg)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(results(root)) == 6
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items()), "a finished run was redone"


def test_a_replayed_run_counts_what_its_cache_hits_would_have_cost_against_its_cost_limit():
    import pytest

    from mas.llm.limits_run import RunBudget, RunLimitReached
    from mas.study_settings import LimitSettings

    class Totals:
        totals = {"token_in": 0, "token_out": 0, "cost_usd": 0.0}

    budget, tracer = RunBudget(limits=LimitSettings(cost_usd=2.0)), Totals()
    for _ in range(3):  # three calls answered from the cache: 0 paid, 0.8 USD each had they been sent
        reserved = budget.start(tracer)
        budget.finish(100, 0.0, 0.8, reserved)
    with pytest.raises(RunLimitReached, match=r"limits.cost_usd = 2 \(used 2.4"):
        budget.start(tracer)  # where the original run stopped, not 2 USD of new calls later


def test_the_compute_matched_phase_counts_what_the_sweep_spent_before_it(tmp_path):
    cfg = tmp_path / "priced.toml"
    cfg.write_text('concurrency = 1\n[models.default]\nprovider = "scripted"\nmodel = "scripted"\n'
                   "price_input_per_1m = 100.0\nprice_output_per_1m = 100.0\n")
    assert run(tmp_path, "--systems", "sas,debate", "--task-limit", "4", "--experiment-id", "probe",
               cfg=cfg).returncode == 0
    debate = results(tmp_path / "out" / "probe")
    spent, per_run = sum(r["cost_total_usd"] for r in debate), min(r["cost_total_usd"] for r in debate)
    # the first phase spends all but half a run of the limit: the matched phase may start one run, not all four
    proc = run(tmp_path, "--systems", "sas,debate,sas_matched", "--task-limit", "4", "--experiment-id", "matched",
               "--set", 'systems.sas_matched.match="debate"', "--set", f"limits.sweep_cost_usd={spent + per_run / 2}",
               cfg=cfg)
    assert proc.returncode == 3, proc.stderr[-2000:]
    matched = [r for r in results(tmp_path / "out" / "matched") if r["system"].startswith("sas_matched")]
    assert len(matched) == 1


def test_a_cost_limit_on_routes_without_prices_is_refused(tmp_path):
    for limit in ("limits.sweep_cost_usd=0.01", "limits.cost_usd=0.001"):
        proc = run(tmp_path, "--systems", "sas", "--task-limit", "1", "--experiment-id", "free", "--set", limit)
        assert proc.returncode == 2 and "no route this sweep calls has a price" in proc.stderr, proc.stderr[-500:]
        assert not (tmp_path / "out" / "free").exists()


def test_what_an_errored_attempt_spent_still_counts_when_it_is_redone(tmp_path):
    cfg = tmp_path / "priced.toml"
    cfg.write_text('concurrency = 1\n[models.default]\nprovider = "scripted"\nmodel = "scripted"\n'
                   "price_input_per_1m = 100.0\nprice_output_per_1m = 100.0\n")
    args = ("--systems", "sas", "--task-limit", "2", "--experiment-id", "e")
    assert run(tmp_path, *args, cfg=cfg).returncode == 0
    root = tmp_path / "out" / "e"
    paths = sorted(root.rglob("run_0.result.json"))
    spent = sum(json.loads(p.read_text())["cost_total_usd"] for p in paths)
    data = json.loads(paths[0].read_text())  # what an endpoint that failed for good mid-run leaves
    paths[0].write_text(json.dumps({**data, "status": "error", "success": False, "completion": False,
                                    "error": "LLMCallError: default route: APIConnectionError"}))
    # the errored attempt's spend is cleared with its files when it is redone; the budget must not forget it
    again = run(tmp_path, *args, "--set", f"limits.sweep_cost_usd={spent * 0.99}", cfg=cfg)
    assert again.returncode == 3, again.stderr[-2000:]
    assert not paths[0].exists()  # cleared to be redone, and not started: the sweep had spent its limit
    manifest = json.loads((root / "manifest.json").read_text())
    assert sum(r["spent_on_errors_usd"] for r in manifest["runs"]) == data["cost_total_usd"] > 0
