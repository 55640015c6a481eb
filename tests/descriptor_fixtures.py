"""Hand-made run directories for the descriptor tests.

``ev(...)`` builds one trace line; ``write_run`` writes a run's trace, eval,
result and metadata files the way the runtime does (result.json last);
``build_experiment`` writes a small seeded experiment with realistic traces:
sends, tool calls and failed results, controller verify events with a
reason, revise and redo.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

T0 = "2026-01-01T00:00:00+00:00"


def ev(actor: str, event_type: str, seq: int = 0, *, tin: int = 0, tout: int = 0, ms: float = 0.0,
       usd: float = 0.0, **payload: Any) -> dict[str, Any]:
    """One trace line as a dict (payload keys as keyword arguments)."""
    return {
        "version": 1, "run_id": "r", "seq": seq, "timestamp_start": T0, "timestamp_end": T0,
        "actor": actor, "event_type": event_type, "payload": payload,
        "token_in": tin, "token_out": tout, "latency_ms": ms, "cost_usd": usd, "state_id": None,
    }


def write_trace(path: Path, events: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, e in enumerate(events):
        lines.append(json.dumps({**e, "seq": i}))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def write_run(task_dir: Path, r: int, events: list[dict[str, Any]], *, success: bool, completion: bool = True,
              score: float | None = None, benchmark: str = "arith", system: str = "sas",
              eval_success: bool | None = None, finished: bool = True, eval_extra: dict | None = None) -> None:
    """Write run ``r``: trace, answer, eval, metadata and (if ``finished``) result.json last."""
    task_dir.mkdir(parents=True, exist_ok=True)
    write_trace(task_dir / f"run_{r}.trace.jsonl", events)
    score = float(success) if score is None else score
    (task_dir / f"run_{r}.answer.txt").write_text("42")
    ev_obj = {"success": success if eval_success is None else eval_success, "score": score, "details": {}}
    ev_obj.update(eval_extra or {})
    (task_dir / f"run_{r}.eval.json").write_text(json.dumps(ev_obj))
    (task_dir / f"run_{r}.metadata.json").write_text(json.dumps({"seed": r, "injected_error": None}))
    if not finished:
        return
    tokens = sum(e["token_in"] + e["token_out"] for e in events)
    result = {
        "version": 1, "run_id": f"{system}-{task_dir.name}-{r}", "benchmark": benchmark, "system": system,
        "task_id": task_dir.name, "run_index": r, "seed": r, "success": success, "completion": completion,
        "score": score, "answer": "42", "tokens_total": tokens,
        "latency_total_ms": sum(e["latency_ms"] for e in events),
        "cost_total_usd": sum(e["cost_usd"] for e in events), "wall_time_s": 0.1, "error": None,
    }
    (task_dir / f"run_{r}.result.json").write_text(json.dumps(result))


def sas_trace(rng: random.Random) -> list[dict[str, Any]]:
    """A single agent: plan, calculator call (sometimes failing), retry, finalize."""
    out = [ev("system:runtime", "plan", content="start", sends=[{"from": "system:runtime", "to": "solver"}])]
    out.append(ev("solver", "plan", tin=rng.randint(50, 90), tout=rng.randint(10, 30), ms=rng.uniform(50, 150),
                  usd=1e-5 * rng.random(), content="add the numbers", step_index=0, role="solver"))
    ok = rng.random() > 0.3
    out.append(ev("solver", "tool_call", tin=20, tout=8, ms=rng.uniform(5, 20), tool="calc",
                  arguments={"expr": "2+2"}, step_index=1))
    out.append(ev("tool:calc", "tool_result", ms=1.5, ok=ok, content="4" if ok else "error"))
    if not ok:
        out.append(ev("solver", "tool_call", tin=20, tout=8, ms=7.25, tool="calc", arguments={"expr": "2+2"},
                      redo=True, step_index=2))
        out.append(ev("tool:calc", "tool_result", ms=1.5, ok=True, content="4"))
    out.append(ev("solver", "finalize", tin=rng.randint(30, 60), tout=5, ms=rng.uniform(20, 60), usd=2e-6,
                  content="42", step_index=3))
    return out


def debate_trace(rng: random.Random) -> list[dict[str, Any]]:
    """Two debaters, a judge; the controller stops a stalled loop with a reason."""
    out = [ev("system:controller", "plan", content="round 1",
              sends=[{"from": "system:controller", "to": "a"}, {"from": "system:controller", "to": "b"}])]
    rounds = rng.randint(1, 3)
    for k in range(rounds):
        for who, other in (("a", "b"), ("b", "a")):
            out.append(ev(who, "act", tin=rng.randint(80, 200), tout=rng.randint(20, 60), ms=rng.uniform(80, 300),
                          usd=3e-5 * rng.random(), content="answer is 42" if k else f"{who} thinks 41",
                          sends=[{"from": who, "to": other}], step_index=len(out), role="debater"))
        if k and rng.random() < 0.5:
            out.append(ev("a", "revise", tin=50, tout=10, ms=40.0, content="revised: 42", step_index=len(out)))
        out.append(ev("system:controller", "verify", content="check", reason="no_progress" if k else None))
    out.append(ev("system:judge", "finalize", tin=100, tout=10, ms=90.0, usd=1e-5, content="42",
                  sends=[{"from": "system:judge", "to": "user"}]))
    return out


def build_experiment(root: Path, *, systems: tuple[str, ...] = ("sas", "debate"), tasks: int = 3, runs: int = 4,
                     seed: int = 0, benchmark: str = "arith") -> Path:
    """A seeded experiment tree ``root/benchmark/system/task/run_*``; returns ``root``."""
    rng = random.Random(seed)
    for system in systems:
        for t in range(tasks):
            task_dir = root / benchmark / system / f"t{t}"
            for r in range(runs):
                events = sas_trace(rng) if system == "sas" else debate_trace(rng)
                success = rng.random() < (0.5 if system == "sas" else 0.7)
                write_run(task_dir, r, events, success=success, completion=success or rng.random() < 0.5,
                          score=1.0 if success else round(rng.random() * 0.5, 3), benchmark=benchmark, system=system)
    return root
