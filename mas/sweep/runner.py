"""Running one (benchmark, system, task, run index) and writing its artifacts.

Files of run ``r`` in ``<root>/<experiment>/<benchmark>/<system>/<task_id>/``
are written in this order: metadata (status running), the trace (streamed),
answer, eval, trace metrics, trajectory, final metadata, and ``result.json``
last and atomically. A run with a ``result.json`` is finished and never
redone; any other leftovers of a run are cleared before it runs again.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from benchmark.base import Benchmark, Task
from descriptor.io import read_json, write_json_atomic, write_text_atomic
from descriptor.run_metrics import compute_run_metrics
from descriptor.schema import RunResult, TraceEvent
from mas.config import ExperimentConfig
from mas.llm.models import ModelSet
from mas.scripted.model import InjectionPlan
from mas.sweep.metadata import run_metadata
from mas.sweep.trajectory import write_trajectory
from mas.systems import SYSTEMS, final_answer, stage_metrics
from mas.topologies.agent import RunContext
from mas.tracing import JsonlWriter, ListCollector, Tracer, use_tracer

log = structlog.get_logger(__name__)

RUN_FILE_SUFFIXES = (
    ".trace.jsonl", ".answer.txt", ".metadata.json", ".eval.json", ".trace_metrics.json",
    ".result.json", ".trajectory.json", ".trajectory.md", ".checkpoints.sqlite",
    ".checkpoints.sqlite-wal", ".checkpoints.sqlite-shm",
)


@dataclass(kw_only=True, frozen=True, slots=True)
class RunSpec:
    """The identity of one run: (benchmark, system, task, run index, seed)."""

    experiment_id: str
    output_root: Path
    benchmark: str
    system: str
    task: Task
    run_index: int
    seed: int

    @property
    def run_dir(self) -> Path:
        return self.output_root / self.experiment_id / self.benchmark / self.system / self.task.task_id

    @property
    def run_id(self) -> str:
        return f"{self.experiment_id}/{self.benchmark}/{self.system}/{self.task.task_id}/run_{self.run_index}"

    def path(self, suffix: str) -> Path:
        """``run_<r><suffix>`` in the run directory."""
        return self.run_dir / f"run_{self.run_index}{suffix}"


def run_seed(base_seed: int, run_index: int) -> int:
    """Seed of run ``run_index``: the same for every system, so systems are compared on equal draws."""
    return base_seed * 10_007 + run_index


def injection_plan(cfg: ExperimentConfig, spec: RunSpec) -> InjectionPlan | None:
    """Whether (and where) the scripted model injects a wrong step into this run.

    ``inject.rate`` picks runs with a generator seeded by the run identity; a
    configured agent/step with rate 0 injects into every run.
    """
    inj = cfg.inject
    exact = inj.agent is not None or inj.step is not None
    if inj.rate <= 0 and not exact:
        return None
    rng = random.Random(f"inject|{cfg.seed}|{spec.benchmark}|{spec.system}|{spec.task.task_id}|{spec.run_index}")
    if inj.rate > 0 and rng.random() >= inj.rate:
        return None
    step = inj.step if inj.step is not None else rng.randrange(0, 4)
    return InjectionPlan(agent=inj.agent, step=step)


def identity_mismatch(spec: RunSpec, result: RunResult) -> list[str]:
    """Identity fields where ``result`` differs from ``spec`` (empty when it is this run's result)."""
    want = {"run_id": spec.run_id, "benchmark": spec.benchmark, "system": spec.system,
            "task_id": spec.task.task_id, "run_index": spec.run_index, "seed": spec.seed}
    return [k for k, v in want.items() if getattr(result, k) != v]


def finished_result(spec: RunSpec) -> RunResult | None:
    """This run's result when it is finished: ``result.json`` exists, parses and names this very run.

    A result of another run (a copied or renamed directory, a changed seed)
    would otherwise be kept as this run's outcome; it is logged and redone.
    """
    path = spec.path(".result.json")
    if not path.is_file():
        return None
    try:
        result = RunResult.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if differs := identity_mismatch(spec, result):
        log.warning("result.json belongs to another run; redoing it", run=spec.run_id, path=str(path),
                    differs=differs)
        return None
    return result


def is_finished(spec: RunSpec) -> bool:
    """Whether the run is finished (see :func:`finished_result`)."""
    return finished_result(spec) is not None


def clear_partial(spec: RunSpec) -> None:
    """Remove an unfinished run's leftovers so it can be redone from scratch."""
    for suffix in RUN_FILE_SUFFIXES:
        spec.path(suffix).unlink(missing_ok=True)


async def relax_sync(saver: AsyncSqliteSaver) -> None:
    """Let the checkpoint database commit without an fsync each time (WAL with ``synchronous=NORMAL``).

    Every super-step commits; with SQLite's default (FULL) each commit is an
    fsync. NORMAL keeps the database consistent through any crash and still
    syncs when the WAL is checkpointed, which closing the connection at the
    run's end does; a power cut mid-run may lose the last commits, and such a
    run (no ``result.json`` yet) is redone from scratch anyway.
    """
    await saver.conn.execute("PRAGMA synchronous=NORMAL")


async def execute_run(spec: RunSpec, cfg: ExperimentConfig, bench: Benchmark, *, tracing: bool = True) -> RunResult:
    """Run one task on one system and write all its artifacts; a finished run is returned as is."""
    if (done := finished_result(spec)) is not None:
        return done
    clear_partial(spec)
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    plan = injection_plan(cfg, spec)
    models = ModelSet(cfg, seed=spec.seed, injection=plan)
    meta = run_metadata(cfg, spec, models=models, status="running")
    # fsync takes milliseconds: off the event loop, where it would stall every other run's calls.
    await asyncio.to_thread(write_json_atomic, spec.path(".metadata.json"), meta)

    # The collector hands finish_run the events just written, instead of parsing the file back.
    collected = ListCollector()
    tracer = Tracer(spec.run_id, [JsonlWriter(spec.path(".trace.jsonl")), collected], enabled=tracing)
    rt = RunContext(cfg=cfg, models=models, question=spec.task.question, answer_kind=bench.answer_kind)
    t0 = time.perf_counter()
    error: str | None = None
    state: dict[str, Any] = {}
    config = {"configurable": {"thread_id": spec.run_id}, "recursion_limit": 200}
    with use_tracer(tracer):
        try:
            async with AsyncSqliteSaver.from_conn_string(str(spec.path(".checkpoints.sqlite"))) as saver:
                await relax_sync(saver)
                graph = SYSTEMS[spec.system](rt).compile(checkpointer=saver)
                state = await graph.ainvoke({}, config)
        except Exception as err:  # recorded, not raised: the sweep goes on
            error = f"{type(err).__name__}: {err}"
            tracer.emit("system:runtime", "error", {"kind": "run_failed", "error": error[:2000]})
            log.warning("run failed", run=spec.run_id, error=error)
        finally:
            tracer.close()
    wall_s = time.perf_counter() - t0
    # Evaluation may run code in a sandbox for seconds: keep it off the event loop.
    return await asyncio.to_thread(finish_run, spec, cfg, bench, state=state, error=error, wall_s=wall_s,
                                   models=models, plan=plan, meta=meta, tracing=tracing, totals=tracer.totals,
                                   events=collected.events)


def finish_run(spec: RunSpec, cfg: ExperimentConfig, bench: Benchmark, *, state: dict[str, Any], error: str | None,
               wall_s: float, models: ModelSet, plan: InjectionPlan | None, meta: dict[str, Any],
               tracing: bool, totals: dict[str, Any], events: list[TraceEvent]) -> RunResult:
    """Evaluate the answer and write every artifact after the trace; ``result.json`` last."""
    answer = final_answer(state) if error is None else None
    completion = answer is not None
    evaluation = bench.evaluate(spec.task, answer or "")
    write_text_atomic(spec.path(".answer.txt"), answer or "")
    write_json_atomic(spec.path(".eval.json"), {"success": evaluation.success, "completion": completion,
                                                 "score": evaluation.score, "details": evaluation.details})
    metrics = compute_run_metrics(events).model_dump()
    write_json_atomic(spec.path(".trace_metrics.json"), {
        "success": evaluation.success, "completion": completion, **metrics, "stages": stage_metrics(state),
    })
    write_trajectory(spec.path(".trajectory.json"), spec.path(".trajectory.md"), events, spec.task.question, answer)
    meta.update(status="finished" if error is None else "failed", error=error, models=models.labels(),
                injected_error=plan.fired_at if plan else None, wall_time_s=wall_s)
    write_json_atomic(spec.path(".metadata.json"), meta)
    result = RunResult(
        run_id=spec.run_id, benchmark=spec.benchmark, system=spec.system, task_id=spec.task.task_id,
        run_index=spec.run_index, seed=spec.seed, success=evaluation.success, completion=completion,
        score=evaluation.score, answer=answer or "",
        tokens_total=metrics["tokens_total"] if tracing else totals["token_in"] + totals["token_out"],
        latency_total_ms=metrics["latency_total"], cost_total_usd=metrics["cost_total"] if tracing else totals["cost_usd"],
        wall_time_s=wall_s, error=error,
    )
    write_json_atomic(spec.path(".result.json"), result.model_dump(mode="json"))
    return result


def load_result(path: Path) -> RunResult:
    return RunResult.model_validate(read_json(path))
