"""Running one (benchmark, system, task, run index) and writing its artifacts.

Files of run ``r`` in ``<root>/<experiment>/<benchmark>/<system>/<task_id>/``
are written in this order: the trace (streamed), answer, eval, trace metrics, the report's page data,
trajectory, metadata, and ``result.json`` last and atomically. A run with a ``result.json`` is finished and never
redone; any other leftovers of a run are cleared before it runs again.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langgraph.checkpoint.memory import InMemorySaver

from benchmark.base import Benchmark, Evaluation, Task
from descriptor.errors import UserError
from descriptor.events import ErrorInfo, Event
from descriptor.io import write_json_atomic, write_text_atomic
from descriptor.layout import RunKey, RunPaths
from descriptor.records import (
    EvalRecord,
    InjectionRecord,
    RunMetadata,
    RunResult,
    TraceMetricsRecord,
)
from descriptor.problems import problem_of
from descriptor.run_config import read_metadata_with_config
from descriptor.run_files import RunFileError, read_result
from descriptor.report.page_file import write_page_file
from descriptor.run_metrics import compute_run_metrics
from descriptor.trace_digest import trace_digest
from mas.config import ExperimentConfig, with_supplied_keys
from mas.llm.cache import use_cache
from mas.llm.call import LLMCallError, prompt_too_long
from mas.llm.limits_run import RunLimitReached, use_budget
from mas.llm.models import ModelSet
from mas.logging import get_logger
import mas.otel  # noqa: F401  (the package's own trace processor, the OpenTelemetry exporter, registers)
from mas.llm.injection import InjectionPlan
from mas.sweep.benchmarks import check_isolation, run_benchmark
from mas.sweep.checkpoints import (
    check_checkpoint,
    copy_database,
    keep_or_drop,
    memory_saver,
    open_checkpointer,
    pack_database,
    persist_thread,
)
from mas.sweep.graphs import compiled_graph, current_run
from mas.sweep.hooks import registered_processors
from mas.sweep.grading import Grading, grade
from mas.sweep.injection import injection_plan, place
from mas.sweep.metadata import run_metadata
from mas.sweep.trajectory import write_trajectory
from mas.systems import final_answer, get_system, known_system, stage_metrics, unit_config
from mas.topologies.agent import RunContext
from mas.topologies.environment import EnvironmentFactory, outcome_environment
from mas.topologies.personas import generate_personas
from mas.tracing import JsonlWriter, ListCollector, TraceProcessor, Tracer, use_tracer

log = get_logger(__name__)
T = TypeVar("T")


@dataclass(kw_only=True, frozen=True, slots=True)
class RunSpec:
    """One run to execute: its identity (benchmark, system, task, run index, seed), where it goes, and the task."""

    experiment_id: str
    output_root: Path
    benchmark: str
    system: str
    task: Task
    run_index: int
    seed: int
    options: dict[str, Any] = field(default_factory=dict)
    """Options the sweep chose for this run's system (``sas_matched``'s ``k``); not part of its identity."""
    paths: RunPaths = field(init=False, repr=False, compare=False)
    """Where the run's files go (built once: a run asks six times, 0.1 ms each)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", self.key.paths(self.output_root / self.experiment_id))

    @property
    def key(self) -> RunKey:
        return RunKey(experiment_id=self.experiment_id, benchmark=self.benchmark, system=self.system,
                      task_id=self.task.task_id, run_index=self.run_index, seed=self.seed)

    @property
    def run_id(self) -> str:
        return self.key.run_id


def run_seed(base_seed: int, run_index: int) -> int:
    """Seed of run ``run_index``: the same for every system, so systems are compared on equal draws."""
    return base_seed * 10_007 + run_index


ROLLBACK_SEED_STRIDE = 1_000_003


def rollback_seed(seed: int, rollback_index: int) -> int:
    """Seed of the resumed part of rollback ``rollback_index`` of a run whose seed is ``seed``.

    Each rollback draws anew: a resumed part that kept the failed run's seed sent the server the same seeds with
    prompts that differ only by the rollback's note, so at temperature > 0 its draws were tied to the failure's
    (the same random numbers behind each sampled token). Still a function of the run's seed and the rollback's
    index only, so a rollback replays exactly."""
    return seed + (rollback_index + 1) * ROLLBACK_SEED_STRIDE


def finished_result(spec: RunSpec) -> RunResult | None:
    """This run's result when it is finished: ``result.json`` exists, parses and names this very run.

    A result of another run (a copied or renamed directory, a changed seed)
    would otherwise be kept as this run's outcome; it is logged and redone.
    """
    paths = spec.paths
    if not paths.result.is_file():
        return None
    try:
        result = read_result(paths)
    except RunFileError:
        return None
    if differs := spec.key.mismatch(result):
        log.warning("result.json belongs to another run; redoing it", run=spec.run_id, path=str(paths.result),
                    differs=differs)
        return None
    return result


def clear_partial(spec: RunSpec) -> None:
    """Remove an unfinished run's leftovers so it can be redone from scratch."""
    if not spec.paths.task_dir.is_dir():  # a fresh sweep: one stat instead of an unlink per run file
        return
    for path in spec.paths.all_files():
        path.unlink(missing_ok=True)


def run_context(cfg: ExperimentConfig, bench: Benchmark, task: Task, *, seed: int,
                injection: InjectionPlan | None, options: dict[str, Any] | None = None) -> RunContext:
    """What the graph of one run of ``task`` needs: config, models, the question, and its environment if any.

    The injection plan, the benchmark's name, the task's structured fields (``Task.metadata``) and, on a
    benchmark solved by acting, the task's reference actions are the scripted provider's own arguments: it
    carries out the injection and plays the task from its fields (replaying the actions through the real tool
    loop), never reading the task back from the prompt.
    """
    new_environment: EnvironmentFactory | None = None
    oracle = None
    if bench.make_environment(task) is not None:
        new_environment = functools.partial(bench.make_environment, task)
        oracle = [{"name": a.name, "args": dict(a.args)} for a in bench.reference_actions(task)]
    models = ModelSet(cfg, seed=seed, provider_args={"scripted": {
        "injection": injection, "benchmark": bench.name, "task": dict(task.metadata), "oracle_actions": oracle}})
    return RunContext(cfg=cfg, models=models, question=task.question, answer_kind=bench.answer_kind,
                      new_environment=new_environment, injection=injection, system_options=dict(options or {}),
                      task_id=task.task_id)


NOT_EVALUATED = "not evaluated: the run ended in an infrastructure error"


def evaluate_run(bench: Benchmark, task: Task, rt: RunContext, state: dict[str, Any], answer: str | None,
                 error: str | None, *, infrastructure: bool = True, grading: Grading | None = None) -> Evaluation:
    """The benchmark's verdict on a finished graph: its answer, and the environment it names as its outcome.

    A run that ended in an error is not evaluated (doing nothing would
    "solve" a WorkBench task that expects no action): an infrastructure error
    is no task result at all (summaries leave it out of every task metric);
    the system's own failure (a graph exception, a prompt over the context) fails the task.
    ``grading``: the judge's reply to the benchmark's grading prompt (:mod:`mas.sweep.grading`), if any.
    """
    if error is not None:
        return Evaluation(success=False, score=0.0, details={"error": NOT_EVALUATED if infrastructure else error})
    environment = outcome_environment(rt.new_environment, state)
    if grading is None or grading.reply is None:
        ev = bench.evaluate(task, answer or "", environment)
    else:
        ev = bench.evaluate(task, answer or "", environment, judge_reply=grading.reply)  # type: ignore[call-arg]
    if grading is None or not grading.details:
        return ev
    return Evaluation(success=ev.success, score=ev.score, details={**ev.details, **grading.details})


def candidate_verdicts(bench: Benchmark, task: Task, rt: RunContext, state: dict[str, Any], error: str | None,
                       grading: Grading | None = None) -> list[bool] | None:
    """The benchmark's verdict on each candidate answer of the run's final vote, for the vote audit: whether the
    judge chose a right answer when one was on offer. Only where that costs next to nothing and needs nothing but
    the text: an evaluation that is a quick comparison (:attr:`~benchmark.base.Benchmark.evaluation_blocks`
    False), no environment, no grading by a judge model; each distinct answer is evaluated once."""
    candidates = (state.get("answer") or {}).get("candidates") if error is None else None
    if (not candidates or bench.evaluation_blocks or rt.new_environment is not None
            or (grading is not None and grading.reply is not None)):
        return None
    verdicts: dict[str, bool] = {}
    for text in candidates:
        if text not in verdicts:
            verdicts[text] = bench.evaluate(task, text or "", None).success
    return [verdicts[text] for text in candidates]


def is_completed(answer: str | None, error: str | None) -> bool:
    """A run completed when it ended without an error and with a non-empty final answer."""
    return error is None and bool(answer and answer.strip())


def is_infrastructure_error(err: BaseException) -> bool:
    """True when ``err`` is the infrastructure's failure, not the system's: a model call that failed for good
    (:class:`~mas.llm.call.LLMCallError`: endpoint unreachable, 5xx/429/timeouts after retries, auth, a reply
    that is no chat completion), an endpoint error raised outside a call, or a setup the run cannot work without
    (a dead embedded server, an unavailable sandbox: :class:`~descriptor.errors.UserError`).

    Anything else that ends the graph is the system's own failure: a prompt over the model's context, a graph
    exception, the recursion limit, unusable output.

    >>> is_infrastructure_error(LLMCallError("default route: RateLimitError")), is_infrastructure_error(KeyError("x"))
    (True, False)
    """
    import httpx
    import openai

    if isinstance(err, LLMCallError):
        return not prompt_too_long(err)
    return isinstance(err, UserError | openai.APIError | httpx.HTTPError)


RECURSION_LIMIT = 200
"""LangGraph super-steps a run may take (a debate of 5 agents and 3 rounds takes ~20)."""


async def run_graph(system: str, rt: RunContext, checkpoints: Path | InMemorySaver | None, tracer: Tracer, *,
                    config: dict[str, Any], fork: dict[str, Any] | None = None) -> tuple[dict[str, Any], str | None, bool]:
    """Run ``system``'s graph under ``tracer`` with checkpoints in ``checkpoints`` (a SQLite file, a saver the
    caller keeps, or None: a fresh one in memory): (final state, error, whether the error is the system's own
    failure rather than the infrastructure's).

    ``fork``: resume from the checkpoint named in ``config`` after applying this state update (a rollback; empty:
    as it is); otherwise start a new thread. The topology makes the input and reads the final state. An exception
    is recorded as an ``error`` event and returned, never raised: the sweep goes on. The tracer is closed at the end.

    The error rule (also in ``descriptor/README.md``), two kinds:

    - an infrastructure error (:func:`is_infrastructure_error`: a model call that failed for good after its
      retries, or a non-retryable endpoint error such as 401; a dead embedded server; an unavailable sandbox)
      makes the run ``status: error``: no task result, retried by the next sweep, left out of the task metrics
      with a warning. No topology carries on with a failed branch or replaces a failed judge call (only an
      unusable *reply* falls back), so one such failure ends the run;
    - any other exception is the system's own failure (a prompt over the model's context, a graph exception,
      the recursion limit, unusable output): a finished run with ``completion`` and ``success`` false, counted
      in every rate, as the seed's contract has it.
    """
    state: dict[str, Any] = {}
    error: str | None = None
    own_failure = False
    with use_tracer(tracer), use_cache(rt.cfg.cache, run_seed=rt.models.seed), use_budget(rt.cfg.limits), \
            current_run(rt):
        try:
            async with open_checkpointer(checkpoints) as saver:
                if fork is None and rt.cfg.mas.persona_mode == "generated":  # before the graph: builders read them
                    rt.personas = await generate_personas(rt, get_system(system, rt.cfg))
                graph = compiled_graph(topology := get_system(system, rt.cfg), rt).copy({"checkpointer": saver})
                # The graph's LangChain run is the trace's root span (see mas.spans).
                if fork is None:  # run_config: the config with what the system adds (an app's callbacks)
                    state = await graph.ainvoke(topology.graph_input(rt), {**topology.run_config(rt, config),
                                                                           "run_id": tracer.root})
                else:
                    forked = await graph.aupdate_state(config, fork) if fork else config
                    state = await graph.ainvoke(None, {**topology.run_config(rt, config), **forked,
                                                       "recursion_limit": RECURSION_LIMIT, "run_id": tracer.root})
                state = topology.outcome(state)
        except Exception as err:  # recorded, not raised: the sweep goes on
            error = f"{type(err).__name__}: {err}"
            # A budget reached, a prompt over the context, any failure of the system's own: a task result.
            rt.limit_reached = err.kind if isinstance(err, RunLimitReached) else None
            own_failure = rt.limit_reached is not None or not is_infrastructure_error(err)
            kind = ("limit" if rt.limit_reached else "prompt_too_long" if prompt_too_long(err) else "system_failure") \
                if own_failure else "run_failed"
            tracer.emit("system:runtime", "error", ErrorInfo(kind=kind, error=error[:2000]))
            log.warning("run failed", run=tracer.run_id, error=error)
        finally:
            tracer.close()
    return state, error, own_failure


async def execute_run(spec: RunSpec, cfg: ExperimentConfig, bench: Benchmark, *, tracing: bool = True) -> RunResult:
    """Run one task on one system and write all its artifacts; a finished run is returned as is."""
    if (done := finished_result(spec)) is not None:
        return done
    cfg = unit_config(cfg, spec.system)  # a model-matrix unit runs on its model's route
    clear_partial(spec)
    paths = spec.paths
    paths.task_dir.mkdir(parents=True, exist_ok=True)
    plan = injection_plan(cfg, spec.key)
    if plan is not None and plan.position is not None:
        plan.probe_steps = await honest_steps(spec, cfg, bench)
        plan.step = place(plan.fraction or 0.0, plan.probe_steps)
    rt = run_context(cfg, bench, spec.task, seed=spec.seed, injection=plan, options=spec.options)
    meta = run_metadata(cfg, spec.key, bench.recorded_task(spec.task), paths=paths, injection=plan)
    meta.system_options = dict(spec.options) or None
    root = uuid.uuid4()
    meta.otel_trace_id = root.hex if tracing else None  # the metadata is written when the run ends (finish_run)
    # The collector hands finish_run the events just written, instead of parsing the file back.
    collected = ListCollector()
    writer = JsonlWriter(paths.trace)
    processors: list[TraceProcessor] = [writer, collected]
    if tracing:
        processors += registered_processors(cfg, meta)
    tracer = Tracer(spec.run_id, processors, enabled=tracing, root=root, record_inputs=cfg.tracing.record_inputs)
    t0 = time.perf_counter()
    config = {"configurable": {"thread_id": spec.run_id}, "recursion_limit": RECURSION_LIMIT}
    saver = memory_saver()  # written to the run's database at the end if the storage policy keeps it
    state, error, own_failure = await run_graph(spec.system, rt, saver, tracer, config=config)
    wall_s = time.perf_counter() - t0
    writer.raise_failure()  # a trace that lost lines is no record of the run: it is redone next time
    grading = await grade(bench, spec.task, rt, final_answer(state), error)
    if grading.error is not None:  # the answer could not be graded: no task result (see mas.sweep.grading)
        state, error, own_failure = {}, grading.error, False
    return await evaluating(bench, rt, finish_run, spec, cfg, bench, state=state, error=error, grading=grading,
                            infrastructure=error is not None and not own_failure, wall_s=wall_s, rt=rt, plan=plan,
                            meta=meta, tracing=tracing, totals=tracer.totals, events=collected.events,
                            checkpoints=saver)


async def evaluating(bench: Benchmark, rt: RunContext, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, work that evaluates run ``rt`` on ``bench``: in a worker thread when the
    benchmark's evaluation may take long (it may run code in a sandbox for seconds) or the run has an environment
    (its actions are replayed for the evaluation), else here, on the event loop (see
    :attr:`benchmark.base.Benchmark.evaluation_blocks`)."""
    if bench.evaluation_blocks or rt.new_environment is not None:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return fn(*args, **kwargs)


async def honest_steps(spec: RunSpec, cfg: ExperimentConfig, bench: Benchmark) -> int:
    """Trajectory steps ``spec``'s run takes without an injected error (to place one by relative position).

    Runs the task once with no injection, no trace and checkpoints in memory;
    with the (deterministic) scripted model its steps are the real run's steps
    up to the error. A failure of this run is an error of the sweep, not of
    the task.
    """
    cfg = unit_config(cfg, spec.system)
    fast = cfg.model_copy(update={"models": {n: r.model_copy(update={"scripted_latency_ms": 0.0})
                                             for n, r in cfg.models.items()}})
    rt = run_context(fast, bench, spec.task, seed=spec.seed, injection=None, options=spec.options)
    tracer = Tracer(spec.run_id, [], enabled=False)
    config = {"configurable": {"thread_id": spec.run_id}, "recursion_limit": RECURSION_LIMIT}
    _, error, _ = await run_graph(spec.system, rt, None, tracer, config=config)
    if error is not None:
        raise RuntimeError(f"{spec.run_id}: counting the run's steps to place the injected error failed: {error}")
    return tracer.next_step


def finish_run(spec: RunSpec, cfg: ExperimentConfig, bench: Benchmark, *, state: dict[str, Any], error: str | None,
               grading: Grading | None = None, infrastructure: bool, wall_s: float, rt: RunContext, plan: InjectionPlan | None, meta: RunMetadata,
               tracing: bool, totals: dict[str, Any], events: list[Event],
               checkpoints: InMemorySaver | None = None) -> RunResult:
    """Evaluate the answer and write every artifact after the trace; ``result.json`` last.

    The run's JSON files are written compact (``jq .`` shows them indented): indentation was a third of
    ``metadata.json`` and is repeated in every run of a sweep. Only ``result.json`` is fsynced: it is the
    run's commit record, written last, and a run without it is redone. The files before it survive a crash
    of the process (the kernel holds their pages); fsyncing each was ~6 ms of a 70 ms scripted run. The
    run's files before it are written in place (``staged``: see :func:`descriptor.io.write_bytes_atomic`),
    ``metadata.json`` too: until ``result.json`` exists nothing reads a run's metadata, and a crash that cuts
    it short leaves a run that is redone. A temporary file and a rename
    each time were two more file creations a run, 0.1-1.2 ms of kernel CPU each on a VM's disk."""
    paths = spec.paths
    models = rt.models
    answer = final_answer(state) if error is None else None
    completion = is_completed(answer, error)
    evaluation = evaluate_run(bench, spec.task, rt, state, answer, error, infrastructure=infrastructure, grading=grading)
    write_text_atomic(paths.answer, answer or "", durable=False, staged=True)
    write_json_atomic(paths.eval, EvalRecord(
        success=evaluation.success, completion=completion, score=evaluation.score, details=evaluation.details,
        candidate_success=candidate_verdicts(bench, spec.task, rt, state, error, grading)), indent=None,
        durable=False, staged=True)
    metrics = compute_run_metrics(events)
    # the trace is closed by now: its digest and page data spare every summary and report a parse
    digest = trace_digest(events, paths.trace.read_bytes()) if paths.trace.exists() else None
    record = TraceMetricsRecord(success=evaluation.success, completion=completion, **metrics.model_dump(),
                                stages=stage_metrics(state), digest=digest).sealed()
    write_json_atomic(paths.trace_metrics, record, indent=None, durable=False, staged=True)
    if digest is not None:
        write_page_file(paths.page, events, digest.sha256, staged=True)
    recorded = bench.recorded_task(spec.task)  # what run files may hold (BrowseComp: no clear-text problem)
    write_trajectory(paths, events, recorded.question, answer, reference=recorded.reference, error=error,
                     evaluation={"success": evaluation.success, "score": evaluation.score}, staged=True)
    keep = cfg.storage.checkpoints == "all" or (cfg.storage.checkpoints == "failed" and not evaluation.success)
    if keep and checkpoints is not None:
        persist_thread(checkpoints, spec.run_id, paths.checkpoints)
    meta.checkpoint_db = pack_database(paths.checkpoints).name if keep_or_drop(paths.checkpoints, keep=keep) else None
    meta.status = "error" if infrastructure else "finished"
    meta.error, meta.models, meta.wall_time_s = error, models.labels(), wall_s
    meta.injected_error = InjectionRecord(**plan.fired_at) if plan and plan.fired_at else None
    meta.personas = rt.personas
    write_json_atomic(paths.metadata, meta, indent=None, durable=False, staged=True)
    result = RunResult(
        **spec.key.identity(), status="error" if infrastructure else "finished", success=evaluation.success,
        completion=completion, score=evaluation.score, answer=answer or "",
        tokens_total=metrics.tokens_total if tracing else totals["token_in"] + totals["token_out"],
        latency_total_ms=metrics.latency_total, cost_total_usd=metrics.cost_total if tracing else totals["cost_usd"],
        wall_time_s=wall_s, error=error, limit=rt.limit_reached,
        grading_cost_usd=float(grading.details.get("judge_cost_usd", 0.0)) if grading is not None else 0.0,
        **problem_of(spec.task.metadata),
    )
    write_json_atomic(paths.result, result, indent=None)
    return result


@dataclass(kw_only=True, frozen=True, slots=True)
class ResumeOutcome:
    """What resuming a run from one of its checkpoints produced (files under ``paths``)."""

    paths: RunPaths
    """The rollback's files: ``run_<r>.rollback_<k>.*``."""
    success: bool
    score: float
    answer: str
    error: str | None
    tokens: int
    """Tokens the resumed part spent (tokens)."""
    cost_usd: float
    """What the resumed part cost (USD)."""
    steps_redone: int
    """Trajectory steps the resumed part produced."""


async def resume_run(run: RunPaths, *, checkpoint_id: str, note: str | None, rollback_index: int,
                     first_step: int, seed: int | None = None) -> ResumeOutcome:
    """Fork run ``run`` at checkpoint ``checkpoint_id``, tell its agents ``note`` (None: nothing), run it to the end,
    evaluate.

    Writes ``run_<r>.rollback_<k>.trace.jsonl``, ``.eval.json`` and a copy of
    the checkpoint database (the original run's files are never touched).
    The resumed steps are numbered from ``first_step`` and marked
    ``payload.redo``. A scripted injection that already fired does not fire
    again. The resumed part draws with ``seed``, by default :func:`rollback_seed` of the run's seed and
    ``rollback_index`` (another sample of a stochastic model than the run's).
    """
    try:
        meta = read_metadata_with_config(run)  # an older run's inline config, else its experiment's config file
    except RunFileError as err:
        raise UserError(str(err)) from None
    cfg = with_supplied_keys(ExperimentConfig.model_validate(meta.config))  # stored configs hold no keys
    if not known_system(meta.system, cfg):
        raise UserError(f"{run.metadata}: system {meta.system!r} is not available in this installation")
    topology = get_system(meta.system, cfg)  # an application system is loaded (and checked) here
    source_db = run.task_dir / meta.checkpoint_db if meta.checkpoint_db else None
    if source_db is None or not source_db.is_file():
        raise UserError(f"{run.prefix}: the run kept no checkpoints (settings: checkpoints), so it cannot be resumed")
    check_checkpoint(source_db, thread_id=meta.thread_id, checkpoint_id=checkpoint_id)
    bench = run_benchmark(cfg, meta.benchmark)
    check_isolation(cfg, {meta.benchmark: bench})
    task = bench.restored_task(Task(task_id=meta.task_id, question=meta.task.question, reference=meta.task.reference,
                                    metadata=meta.task.metadata))
    out = run.for_rollback(rollback_index)
    copy_database(source_db, out.checkpoints)
    plan = meta.injection_plan
    injection = None if plan is None else InjectionPlan(agent=plan.agent, step=plan.step,
                                                        fired=meta.injected_error is not None)
    rt = run_context(cfg, bench, task, seed=rollback_seed(meta.seed, rollback_index) if seed is None else seed,
                     injection=injection, options=meta.system_options)
    rt.personas = meta.personas  # the resumed part keeps the run's generated personas
    out.trace.unlink(missing_ok=True)
    collected = ListCollector()
    writer = JsonlWriter(out.trace)
    tracer = Tracer(f"{meta.run_id}/rollback_{rollback_index}", [writer, collected],
                    first_step=first_step, redo=True, record_inputs=cfg.tracing.record_inputs)
    config = {"configurable": {"thread_id": meta.thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
    state, error, own_failure = await run_graph(meta.system, rt, out.checkpoints, tracer, config=config,
                                                fork=topology.fork_update([] if note is None else [note]))
    writer.raise_failure()
    answer = final_answer(state) if error is None else None
    grading = await grade(bench, task, rt, answer, error)
    if grading.error is not None:
        answer, error, own_failure = None, grading.error, False
    ev = await evaluating(bench, rt, evaluate_run, bench, task, rt, state, answer, error,
                          infrastructure=not own_failure, grading=grading)
    write_json_atomic(out.eval, EvalRecord(success=ev.success, completion=is_completed(answer, error), score=ev.score,
                                           details=ev.details))
    keep_or_drop(out.checkpoints, keep=not ev.success)  # a failed rollback may be rolled back again
    metrics = compute_run_metrics(collected.events)
    # ``error`` is an infrastructure failure only; the system's own failure is a failed rollback (in the trace).
    return ResumeOutcome(paths=out, success=ev.success, score=ev.score, answer=answer or "",
                         error=None if own_failure else error,
                         tokens=metrics.tokens_total, cost_usd=metrics.cost_total,
                         steps_redone=sum(1 for e in collected.events if e.step_index is not None))
