"""Budgets hold from the first call: a call in flight reserves the most it can use (its prompt and reply cap, at
its route's price), and a run in flight the most a run may spend, so neither the first round of a debate nor the
first runs of a concurrent sweep can overshoot because nothing had finished yet."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from main import main


def sweep(tmp_path: Path, exp: str, *extra: str, config: str | None = None) -> int:
    argv = ["run", "--benchmark", "arith", "--output-root", str(tmp_path / "out"), "--experiment-id", exp,
            "--progress", "none", *extra]
    if config is not None:
        (tmp_path / f"{exp}.toml").write_text(config)
        argv += ["--config", str(tmp_path / f"{exp}.toml")]
    else:
        argv += ["--model", "scripted"]
    return main(argv)


def calls(root: Path) -> list[list[dict]]:
    """Each run's model-call events."""
    return [[e for e in map(json.loads, p.read_text().splitlines()) if e.get("model")]
            for p in sorted(root.rglob("run_0.trace.jsonl"))]


def results(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("run_0.result.json"))]


@pytest.mark.parametrize("debaters", [3, 5])
def test_the_first_round_of_a_debate_cannot_pass_a_token_budget_by_more_than_one_call(tmp_path, debaters):
    """limits.tokens = 1 with three debaters: three calls started (1,005 tokens) since nothing had finished."""
    assert sweep(tmp_path, "e", "--systems", "debate", "--task-limit", "2", "--set", "limits.tokens=1",
                 "--set", f"mas.agents={debaters}") == 0
    for run, events in zip(results(tmp_path / "out" / "e"), calls(tmp_path / "out" / "e"), strict=True):
        assert run["limit"] == "tokens" and run["status"] == "finished"
        assert len(events) == 1, f"{len(events)} calls under limits.tokens = 1"  # the first, let finish
        assert run["tokens_total"] == sum(e["token_in"] + e["token_out"] for e in events)


PRICED = ('concurrency = {c}\n[models.default]\nprovider = "scripted"\nmodel = "scripted"\n'
          "price_input_per_1m = 10000000.0\nprice_output_per_1m = 10000000.0\n")


def test_the_first_round_of_a_debate_cannot_pass_a_cost_budget_by_more_than_one_call(tmp_path):
    assert sweep(tmp_path, "e", "--systems", "debate", "--task-limit", "1", "--set", "limits.cost_usd=0.01",
                 config=PRICED.format(c=1)) == 0
    (run,), (events,) = results(tmp_path / "out" / "e"), calls(tmp_path / "out" / "e")
    assert run["limit"] == "cost_usd" and len(events) == 1


def test_a_sweeps_spending_limit_counts_the_runs_in_flight_at_any_concurrency(tmp_path):
    """$1 with runs of thousands of dollars at concurrency 3: three runs started at once and all were paid."""
    assert sweep(tmp_path, "e", "--systems", "sas", "--task-limit", "6", "--set", "limits.sweep_cost_usd=1",
                 config=PRICED.format(c=3)) == 3
    done = results(tmp_path / "out" / "e")
    assert len(done) == 1 and done[0]["cost_total_usd"] > 1  # one run past the limit, no more


def test_with_a_per_run_limit_runs_in_flight_reserve_it_and_the_sweep_stays_within_one_run(tmp_path):
    per_run, limit = 20000.0, 50000.0
    code = sweep(tmp_path, "e", "--systems", "sas", "--task-limit", "8", "--set", f"limits.sweep_cost_usd={limit}",
                 "--set", f"limits.cost_usd={per_run}", config=PRICED.format(c=4))
    done = results(tmp_path / "out" / "e")
    spent = sum(r["cost_total_usd"] for r in done)
    assert code == 3 and 1 < len(done) < 8
    assert spent < limit + max(r["cost_total_usd"] for r in done)


def test_the_gate_holds_runs_until_one_bounds_what_a_run_spends():
    from mas.sweep.spending import WAIT, SpendGate

    gate = SpendGate(["a", "b", "c", "d"], 8.0, 0.0)  # type: ignore[list-item]
    assert gate.take_nowait() == "a" and gate.take_nowait() is WAIT  # nothing bounds run a yet: it runs alone
    gate.finished(3.0)  # a run costs up to 3: with 3 spent, b and c fit (3 + 3 < 8), a third would not (3 + 6)
    assert [gate.take_nowait(), gate.take_nowait(), gate.take_nowait()] == ["b", "c", WAIT]

    async def later() -> object:
        waiting = asyncio.ensure_future(gate.take())
        await asyncio.sleep(0)
        gate.finished(3.0)  # 6 spent, c in flight: 6 + 3 >= 8, d still waits
        await asyncio.sleep(0)
        assert not waiting.done()
        gate.finished(3.0)  # 9 spent: the limit is reached, d never starts
        return await waiting

    assert asyncio.run(later()) is None and gate.stopped
    free = SpendGate(["a", "b"], None, 0.0)  # type: ignore[list-item]
    assert [free.take_nowait(), free.take_nowait(), free.take_nowait()] == ["a", "b", None]
