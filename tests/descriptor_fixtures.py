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
    """One version-2 trace line as a dict; payload keys as keyword arguments, the rest of the typed
    payload filled in as the runtime writes it (an agent output, a tool call or result, a decision, ...)."""
    return {
        "version": 2, "run_id": "r", "seq": seq, "timestamp_start": T0, "timestamp_end": T0,
        "actor": actor, "event_type": event_type, "payload": typed_payload(actor, event_type, payload),
        "token_in": tin, "token_out": tout, "latency_ms": ms, "cost_usd": usd, "state_id": None,
    }


def typed_payload(actor: str, event_type: str, p: dict[str, Any]) -> dict[str, Any]:
    """``p`` completed to the payload type of ``event_type`` (see descriptor/events.py)."""
    system = actor == "system" or actor.startswith("system:")
    if event_type == "tool_call":
        return {"kind": "tool_call", "role": actor, "tool": "calc", "arguments": {}, **p}
    if event_type == "tool_result":
        out = {"kind": "tool_result", "tool": "calc", "ok": True, "output": str(p.get("content", "")), **p}
        out.pop("content", None)
        return out
    if event_type == "error":
        return {"kind": "llm_call", "error": "", **p}
    if event_type == "verify" and actor == "system:controller":
        return {"kind": "termination", "stage": "debate", "round": 0, "max_rounds": 3,
                "stop": p.get("reason") is not None, **p}
    if event_type == "finalize" and system:
        return {"kind": "final_answer", "answer_artifact": str(p.get("content", "")), "confidence": 1.0,
                "source_agent": "a", "selection": "lexical", **p}
    return {"kind": "answer", "role": actor, "answer_artifact": str(p.get("content", "")), "confidence": 0.5, **p}


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
        "version": 2, "run_id": f"{system}-{task_dir.name}-{r}", "benchmark": benchmark, "system": system,
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


def identity(task_dir: Path, r: int, *, benchmark: str | None = None, system: str | None = None) -> dict[str, Any]:
    """The RunIdentity fields of run ``r`` of ``task_dir`` (``<root>/<benchmark>/<system>/<task>``)."""
    benchmark = benchmark or task_dir.parent.parent.name
    system = system or task_dir.parent.name
    return {"run_id": f"e/{benchmark}/{system}/{task_dir.name}/run_{r}", "benchmark": benchmark, "system": system,
            "task_id": task_dir.name, "run_index": r, "seed": r}


def metadata_record(task_dir: Path, r: int, *, question: str = "What is 6*7?", reference: Any = 42,
                    injected: dict | None = None, **changes: Any) -> dict[str, Any]:
    """A complete ``run_<r>.metadata.json`` body (RunMetadata) of a finished run."""
    ident = identity(task_dir, r)
    return {**ident, "version": 2, "experiment_id": "e", "status": "finished", "started_at": T0,
            "task": {"question": question, "reference": reference, "metadata": {}}, "thread_id": ident["run_id"],
            "checkpoint_db": f"run_{r}.checkpoints.sqlite", "config": {}, "injected_error": injected, **changes}


def result_record(task_dir: Path, r: int, *, success: bool, **changes: Any) -> dict[str, Any]:
    """A complete ``run_<r>.result.json`` body (RunResult)."""
    return {**identity(task_dir, r), "version": 2, "status": "finished", "success": success, "completion": True,
            "score": float(success), "answer": "41", "tokens_total": 0, "latency_total_ms": 0.0,
            "cost_total_usd": 0.0, "wall_time_s": 0.1, "error": None, **changes}
