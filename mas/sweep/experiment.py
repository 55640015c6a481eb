"""An experiment: benchmarks × systems × tasks × repeated runs, run as a resumable sweep.

Everything is validated before the first run starts (benchmarks, systems,
counts, executor, API keys, the embedded server), so bad input never leaves
a half-made experiment behind. The sweep itself (resume, manifest, clean
stop on signals, progress) is :func:`mas.sweep.loop.run_sweep`; where runs
execute is :mod:`mas.sweep.executors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from benchmark.base import Benchmark, check_task_ids
from descriptor.errors import UserError
from descriptor.extras import require_extra
from descriptor.layout import UNIT_SEP, split_unit
from descriptor.records import RunResult
from descriptor.suggest import unknown_names
from descriptor.registry import loaded_plugins
from mas.apps.topology import AppTopology
from mas.config import ExperimentConfig, require_api_key
from mas.llm.prices import price_routes
from mas.llm.providers import check_provider
from mas.sweep.defaults import DEFAULT_RETRY_ERRORS
from mas.sweep.benchmarks import benchmark_options, check_isolation, resolve_benchmarks, run_benchmark
from mas.sweep.executors import EXECUTORS, SweepJob
from mas.sweep.grading import grading_routes
from mas.sweep.lock import sweep_lock
from mas.sweep.matching import check_matching, matched_ks
from mas.sweep.loop import SweepInterrupted, run_sweep
from mas.sweep.progress import ProgressMode
from mas.sweep.selection import TaskSelection, select_tasks
from mas.sweep.runner import RunSpec, run_seed
from mas.systems import SYSTEMS, agent_roles, get_system, known_system, unit_config

__all__ = ["ExperimentRequest", "SweepInterrupted", "plan_runs", "prepare_models", "run_experiment", "summary_rows",
           "validate_request"]


@dataclass(kw_only=True, slots=True)
class ExperimentRequest:
    """What ``main.py run`` asks for."""

    cfg: ExperimentConfig
    benchmarks: list[str]
    systems: list[str]
    task_limit: int
    runs_per_task: int
    experiment_id: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
    tracing: bool = True
    executor: str = "local"
    """``local`` (asyncio in this process) or ``dask``; see :mod:`mas.sweep.executors`."""
    scheduler_address: str | None = None
    """``dask`` only: scheduler to connect to; None starts an in-process LocalCluster."""
    workers: int = 1
    """``dask`` without a scheduler address: worker processes on this machine (1: one in-process worker)."""
    progress: ProgressMode = "auto"
    """``auto``: a bar on a terminal, log lines otherwise; ``bar``, ``log`` or ``none``."""
    retry_errors: int = DEFAULT_RETRY_ERRORS
    """Times a run that ended in an infrastructure error is redone by later invocations (0: never)."""
    selection: TaskSelection = field(default_factory=TaskSelection)
    """Which tasks: the first ``task_limit`` (default), named ids, shuffled, stratified."""
    models: list[str] = field(default_factory=list)
    """A model matrix: every system runs on each of these routes (units ``system@route``); empty: the config's
    default route only."""

    @property
    def units(self) -> list[str]:
        """What the sweep compares: the systems, or every (system, model) pair of a model matrix."""
        systems = list(dict.fromkeys(self.systems))
        return [f"{s}{UNIT_SEP}{m}" for s in systems for m in self.models] if self.models else systems

    @property
    def output_root(self) -> Path:
        return Path(self.cfg.output_root)

    @property
    def experiment_root(self) -> Path:
        return self.output_root / self.experiment_id


def _check_cost_limits(req: ExperimentRequest) -> None:
    """Refuse a cost limit that can never stop anything: every route the sweep calls is unpriced (its cost is 0)."""
    lim = req.cfg.limits
    given = [f"limits.{k}" for k in ("cost_usd", "sweep_cost_usd") if getattr(lim, k) is not None]
    if not given:
        return
    routes = req.cfg.used_routes(agent_roles(list(req.systems), req.cfg))
    if all(not r.price_input_per_1m and not r.price_output_per_1m for r in routes.values()):
        raise UserError(f"{' and '.join(given)}: no route this sweep calls has a price ({', '.join(routes)}: "
                        "price_input_per_1m and price_output_per_1m are 0), so every run costs 0 USD and the limit "
                        "never stops anything; set the prices (models.<route>.price_input_per_1m, "
                        "price_output_per_1m) or limit tokens instead (limits.tokens)")


def validate_request(req: ExperimentRequest) -> dict[str, Benchmark]:
    """Check everything a sweep needs before any run starts; returns the benchmark adapters."""
    if req.task_limit < 1:
        raise UserError(f"--task-limit must be at least 1 (got {req.task_limit})")
    if req.runs_per_task < 1:
        raise UserError(f"--runs-per-task must be at least 1 (got {req.runs_per_task})")
    if req.retry_errors < 0:
        raise UserError(f"--retry-errors must be 0 or more (got {req.retry_errors})")
    if not req.benchmarks:
        raise UserError("no benchmark given; see `python main.py list-benchmarks`")
    req.cfg, req.benchmarks = resolve_benchmarks(req.cfg, req.benchmarks)
    unknown = [s for s in req.systems if not known_system(s, req.cfg)]
    if unknown or not req.systems:
        known = sorted([*SYSTEMS, *req.cfg.systems.apps()])
        raise UserError(f"unknown system(s) {unknown_names(unknown, known) or '(none given)'}; known: {', '.join(known)} "
                        "(or app:MODULE:FACTORY for a LangGraph graph of your own)")
    shadowing = sorted(n for n in req.cfg.systems.apps() if n in SYSTEMS)
    if shadowing:
        raise UserError(f"systems.{shadowing[0]}: {shadowing[0]!r} is a built-in system; give the application "
                        "system another name")
    # an application system is loaded and checked now, before any run
    apps = [s for s in req.systems if isinstance(get_system(s, req.cfg), AppTopology)]
    if apps and req.cfg.mas.persona_mode == "generated":
        raise UserError(f"mas.persona_mode = 'generated' writes personas into the built-in agents' prompts; "
                        f"{apps[0]} prompts its agents itself and would never read them: use 'static'")
    check_matching(req.systems, req.cfg.systems.sas_matched.match)
    _check_models(req)
    check_experiment_id(req.experiment_id)
    check_output_root(req.output_root)
    if req.executor not in EXECUTORS:
        raise UserError(f"--executor: unknown executor {req.executor!r}; known: {', '.join(EXECUTORS)}")
    if req.executor == "dask":
        require_extra("dask", "--executor dask", "distributed")
    if req.scheduler_address and req.executor != "dask":
        raise UserError("--scheduler-address is only used with --executor dask")
    _check_workers(req)
    benches = {name: run_benchmark(req.cfg, name) for name in req.benchmarks}
    _check_injection(req.cfg, agent_roles(req.systems, req.cfg))
    routes = list(grading_routes(req.cfg, benches.values()).items())
    for unit in req.units:  # each unit of a model matrix has its own default route
        cfg = unit_config(req.cfg, unit)
        routes += cfg.used_routes(agent_roles([split_unit(unit)[0]], cfg)).items()
    for name, route in routes:
        check_provider(name, route)
        require_api_key(route, name)
    _price_routes(req, [name for name, _ in routes])
    _check_cost_limits(req)
    check_isolation(req.cfg, benches)
    return benches


def _price_routes(req: ExperimentRequest, used: list[str]) -> None:
    """Settle every route's prices (:func:`mas.llm.prices.price_routes`) in ``req.cfg``, the config the runs record;
    a route the sweep calls whose model the price table does not know is a warning on the console."""
    used += [split_unit(unit)[1] or "default" for unit in req.units]  # a model matrix's routes run as "default"
    req.cfg, warnings = price_routes(req.cfg, used)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _check_models(req: ExperimentRequest) -> None:
    """A model matrix names known routes, each once, none holding the unit separator."""
    if len(set(req.models)) != len(req.models):
        raise UserError(f"--models: a route is named twice ({', '.join(req.models)})")
    for m in req.models:
        if UNIT_SEP in m or "/" in m or not m:
            raise UserError(f"--models: route name {m!r} may not be empty or hold {UNIT_SEP!r} or '/'")
        req.cfg.route(m)  # ConfigError naming the known routes


EXPERIMENT_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")


def check_experiment_id(experiment_id: str) -> None:
    """An experiment id is a directory name: 1-100 letters, digits, ``.``, ``_`` or ``-`` (not ``.`` or ``..``)."""
    if EXPERIMENT_ID.fullmatch(experiment_id) is None or experiment_id in (".", ".."):
        shown = repr(experiment_id) if len(experiment_id) <= 60 else f"{experiment_id[:40]!r}... ({len(experiment_id)} characters)"
        raise UserError(f"--experiment-id {shown}: expected 1-100 letters, digits, '.', '_' or '-' "
                        "(a directory name; not '.' or '..')")


def check_output_root(root: Path) -> None:
    """The output root must be a directory, or not exist yet under a directory (it is created)."""
    if root.exists() and not root.is_dir():
        raise UserError(f"--output-root {root}: exists and is not a directory")
    parent = next((p for p in root.absolute().parents if p.exists()), None)
    if not root.exists() and parent is not None and not parent.is_dir():
        raise UserError(f"--output-root {root}: {parent} is not a directory")
    writable = root if root.exists() else parent
    if writable is not None and not os.access(writable, os.W_OK | os.X_OK):
        raise UserError(f"--output-root {root}: {writable} is not writable")


def _check_injection(cfg: ExperimentConfig, roles: tuple[str, ...]) -> None:
    """Error injection is the scripted model's: asked of real models only, it would be recorded but never happen."""
    inj = cfg.inject
    if inj.rate <= 0 and inj.step is None and inj.agent is None and inj.position is None:
        return
    routes = cfg.used_routes(roles)
    if not any(r.provider == "scripted" for r in routes.values()):
        used = ", ".join(f"{n} ({r.provider})" for n, r in routes.items())
        raise UserError(f"--inject-errors/--inject-position (inject.*): only the scripted model injects errors, and "
                        f"no route of this run is scripted ({used}); use --model scripted")
    if inj.position is not None and any(r.provider != "scripted" for r in routes.values()):
        real = ", ".join(n for n, r in routes.items() if r.provider != "scripted")
        raise UserError(f"--inject-position: placing the error runs each task once more to count its steps, "
                        f"which needs every route scripted (not: {real}); use --model scripted")


def _check_workers(req: ExperimentRequest) -> None:
    if req.workers < 1:
        raise UserError(f"--workers must be at least 1 (got {req.workers})")
    if req.workers == 1:
        return
    if req.executor != "dask" or req.scheduler_address:
        raise UserError("--workers starts local dask worker processes: use it with --executor dask and "
                        "without --scheduler-address (a cluster's workers are started with `dask worker`)")
    for name, route in req.cfg.used_routes(agent_roles(req.systems, req.cfg)).items():
        if route.rate_limit.max_concurrent is not None and route.rate_limit.max_concurrent < req.workers:
            raise UserError(f"--workers {req.workers}: models.{name}.rate_limit.max_concurrent is "
                            f"{route.rate_limit.max_concurrent}, and each worker process needs at least one "
                            "of those slots; use at most that many workers")


def plan_runs(req: ExperimentRequest, benches: dict[str, Benchmark]) -> list[RunSpec]:
    """Every run of the experiment, in a stable order (tasks outermost, then run index, then system)."""
    specs = []
    for bname, bench in benches.items():
        tasks = select_tasks(bench, bname, req.task_limit, seed=req.cfg.seed, selection=req.selection)
        # Every adapter's ids, generated or read: each names the directory its runs are written to.
        check_task_ids((t.task_id, f"benchmark {bname}: task {i + 1}") for i, t in enumerate(tasks))
        for task in tasks:
            for r in range(req.runs_per_task):
                for system in req.units:
                    specs.append(RunSpec(experiment_id=req.experiment_id, output_root=req.output_root,
                                         benchmark=bname, system=system, task=task, run_index=r,
                                         seed=run_seed(req.cfg.seed, r)))
    check_identities(specs)
    return specs


def check_identities(specs: list[RunSpec]) -> None:
    """Refuse a run whose identity (experiment id, benchmark, system, task id) holds a secret's value, before any
    run: every file redacts secrets, so the run's record would name another run (``[REDACTED]``), and the
    summaries would leave it out as a stranger's. The message names where the secret comes from, not the value.
    """
    from descriptor.redact import secret_sources, secret_values

    secrets = secret_values()
    for spec in {(s.experiment_id, s.benchmark, s.system, s.task.task_id): s for s in specs}.values():
        identity = f"{spec.experiment_id}/{spec.benchmark}/{spec.system}/{spec.task.task_id}"
        if any(v in identity for v in secrets) and (sources := secret_sources(identity)):
            raise UserError(f"the run {identity} names a value of {' and '.join(sources)}, which is treated as a "
                            "secret (named like one, shaped like a key, or a route's key) and redacted from every "
                            "file, so the run could not be read back as itself: unset or change that value")


def prepare_models(cfg: ExperimentConfig, systems: list[str] | None = None) -> None:
    """Start the embedded server up front when a route of ``systems`` (default: all) uses it (a clear error now,
    not mid-sweep)."""
    if any(r.provider == "embedded" for r in cfg.used_routes(agent_roles(systems, cfg)).values()):
        from mas.serving.server import ensure_server

        ensure_server(cfg.embedded)


async def run_experiment(req: ExperimentRequest) -> list[RunResult]:
    """Run (or resume) the whole experiment with at most ``cfg.concurrency`` runs at once.

    Returns every run's result in plan order. Raises :class:`SweepInterrupted`
    when stopped by SIGINT/SIGTERM and :class:`UserError` when a run crashed
    outside its graph (it is redone on the next invocation).
    """
    benches = validate_request(req)
    specs = plan_runs(req, benches)
    for unit in req.units:  # ensure_server starts the embedded server once, whichever unit asks first
        prepare_models(unit_config(req.cfg, unit), [split_unit(unit)[0]])
    client = None
    if req.scheduler_address:  # an unreachable cluster is bad input: say so before the manifest exists
        from mas.sweep.executors import connect_scheduler

        client = await connect_scheduler(req.scheduler_address)
    lock = contextlib.ExitStack()
    try:
        lock.enter_context(sweep_lock(req.experiment_root, req.experiment_id))  # before anything is written
        # Drawn before the runs start, not beside them: in a thread next to starting runs, matplotlib held
        # the GIL long enough to delay the first model calls by 2-4 times its own ~0.1 s per system.
        await asyncio.to_thread(write_system_pictures, req, benches)
        job = SweepJob(cfg=req.cfg, benches=benches, concurrency=req.cfg.concurrency, tracing=req.tracing,
                       scheduler_address=req.scheduler_address, dask_client=client, workers=req.workers,
                       bench_options={name: benchmark_options(req.cfg, name) for name in benches},
                       plugins=loaded_plugins())
        request = {"benchmarks": list(benches), "systems": list(dict.fromkeys(req.systems)),
                   **({"models": req.models} if req.models else {}),
                   "task_limit": req.task_limit, "runs_per_task": req.runs_per_task, "tracing": req.tracing,
                   **({"selection": req.selection.record()} if not req.selection.default else {})}
        target = req.cfg.systems.sas_matched.match if "sas_matched" in req.systems else None
        first = [s for s in specs if target is None or split_unit(s.system)[0] != "sas_matched"]
        sweep = functools.partial(run_sweep, job=job, root=req.experiment_root, experiment_id=req.experiment_id,
                                  executor=req.executor, request=request, progress=req.progress,
                                  retry_errors=req.retry_errors)
        outcome = await sweep(first)
        if target is not None and not (outcome.crashed or outcome.over_budget):
            # Compute matching: k from the finished runs above, then the matched runs (see mas.sweep.matching).
            later = [s for s in specs if split_unit(s.system)[0] == "sas_matched"]
            ks = matched_ks(req.experiment_root, outcome.results, target=target,
                            units=list(dict.fromkeys((s.benchmark, s.system) for s in later)),
                            fallback_k=req.cfg.systems.sas_matched.k)
            second = [dataclasses.replace(s, options={"k": ks[(s.benchmark, s.system)]}) for s in later]
            more = await sweep(second, spent_before=sum(r.spent_usd for r in outcome.results))
            order = {s.run_id: i for i, s in enumerate(specs)}
            outcome = dataclasses.replace(
                more, results=sorted([*outcome.results, *more.results], key=lambda r: order[r.run_id]),
                skipped=outcome.skipped + more.skipped, ran=outcome.ran + more.ran)
    finally:
        lock.close()
        if client is not None:
            await client.close()
        if "mas.otel.sidecar" in sys.modules:  # spans were exported: deliver the last runs' before returning
            from mas.otel.sidecar import flush_all

            await asyncio.to_thread(flush_all)
    if outcome.crashed:
        shown = "; ".join(f"{k}: {v}" for k, v in list(outcome.crashed.items())[:5])
        raise UserError(f"{len(outcome.crashed)} run(s) crashed outside their graph (in the benchmark's "
                        f"evaluation, the grading or the writing of their files) and were not recorded ({shown}); "
                        "run the same command again to redo them once the cause is fixed")
    if outcome.over_budget:
        raise SweepOverBudget(outcome.results, total=len(specs), limit=req.cfg.limits.sweep_cost_usd or 0.0)
    return outcome.results


class SweepOverBudget(Exception):
    """The sweep stopped scheduling at ``limits.sweep_cost_usd``; ``results`` are the runs that finished."""

    def __init__(self, results: list[RunResult], *, total: int, limit: float) -> None:
        spent = sum(r.spent_usd for r in results)
        grading = sum(r.grading_cost_usd for r in results)
        super().__init__(f"the sweep reached its spending limit (limits.sweep_cost_usd = {limit:g} USD, spent "
                         f"{spent:.6f} USD{f', {grading:.6f} of it grading answers' if grading else ''}): "
                         f"{len(results)} of {total} runs finished, the rest were not started. "
                         "Run the same command with a higher --set limits.sweep_cost_usd=... to finish it")
        self.results = results


def scripted_notes(cfg: ExperimentConfig, benchmarks: list[str], systems: list[str]) -> list[str]:
    """Why a scripted sweep's score on a benchmark says nothing of its systems: the scripted double solves
    ``arith`` problems and replays the reference actions of a benchmark solved by acting; elsewhere it answers
    without knowing the task (a placeholder; SciCode: a stub)."""
    routes = cfg.used_routes(agent_roles(systems, cfg))
    if not any(r.provider == "scripted" for r in routes.values()):
        return []
    blind = [b for b in benchmarks if b != "arith" and run_benchmark(cfg, b).answer_kind != "actions"]
    return [f"note: {b}: the scripted model (--model scripted) solves arith problems and replays the reference "
            f"actions of benchmarks solved by acting; on {b} it answers without knowing the task (a placeholder "
            "or a stub), so its success is 0 unless that happens to be right: the sweep tests the pipeline, not "
            "the systems (use --model embedded or an API route)" for b in blind]


def write_system_pictures(req: ExperimentRequest, benches: dict[str, Benchmark]) -> None:
    """``mas_graph`` and ``workflow_graph`` pictures in every ``<benchmark>/<system>/`` directory (kept once written)."""
    from mas.topologies.pictures import write_graph_pictures

    for bname in benches:
        for unit in req.units:
            write_graph_pictures(req.experiment_root / bname / unit, split_unit(unit)[0], unit_config(req.cfg, unit))


def summary_rows(results: list[RunResult]) -> list[dict[str, object]]:
    """Per (benchmark, system): runs, errors, success and completion rates of the finished runs (errored runs
    are no task results), mean tokens, cost (USD, all runs) and wall time (s)."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.benchmark, r.system), []).append(r)
    rows = []
    for (bench, system), rs in sorted(groups.items()):
        done = [r for r in rs if r.status != "error"]
        n = len(done)
        rows.append({
            "benchmark": bench, "system": system, "runs": len(rs), "errors": len(rs) - n,
            "success_rate": sum(r.success for r in done) / n if n else None,
            "completion_rate": sum(r.completion for r in done) / n if n else None,
            "tokens_mean": sum(r.tokens_total for r in done) / n if n else None,
            "cost_usd_total": sum(r.cost_total_usd for r in rs),
            "wall_s_mean": sum(r.wall_time_s for r in rs) / len(rs),
        })
    return rows
