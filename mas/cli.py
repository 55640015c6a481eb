"""Commands: ``run`` and ``init-config`` (the benchmark commands are in ``benchmark/cli.py``)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from descriptor.cliargs import nonnegative_int, positive_int
from mas.sweep import DEFAULT_RETRY_ERRORS

if TYPE_CHECKING:
    from descriptor.records import RunResult
    from mas.config import ExperimentConfig
    from mas.sweep.experiment import ExperimentRequest


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def load_effective_config(args: argparse.Namespace) -> ExperimentConfig:
    """The config file (or defaults) with this command's overrides applied."""
    # imported here: the config models are ~0.3 s of start-up that commands not running a sweep skip
    from mas.config import load_config
    from mas.overrides import apply_overrides, parse_set_options

    cfg = load_config(getattr(args, "config", None))
    overrides = {
        "model": getattr(args, "model", None),
        "output_root": getattr(args, "output_root", None),
        "seed": getattr(args, "seed", None),
        "concurrency": getattr(args, "concurrency", None),
    }
    if getattr(args, "inject_errors", None) is not None:
        overrides["inject.rate"] = args.inject_errors
    if getattr(args, "inject_position", None) is not None:
        overrides["inject.position"] = args.inject_position
    if getattr(args, "cache", None) is not None:
        overrides["cache.mode"] = args.cache
    overrides.update(parse_set_options(getattr(args, "set", None)))
    return apply_overrides(cfg, **overrides)


def print_table(rows: list[dict[str, object]], title: str) -> None:
    """``title``, then ``rows`` as a table that cuts no value or header: on a narrow terminal it is split into
    several tables led by the first column (:mod:`descriptor.console_table`); off a terminal, one table."""
    from rich.console import Console

    from descriptor.console_table import Column, print_columns

    terminal = sys.stdout.isatty()
    console = Console(highlight=False, width=None if terminal else 10_000)
    if not rows:
        console.print(f"{title}: (no rows)", markup=False)
        return
    console.print(title, soft_wrap=True, markup=False)
    columns = [Column(header=col, right=isinstance(rows[0][col], int | float),
                      cells=tuple(f"{v:.3f}" if isinstance(v, float) else str(v) for v in (r.get(col) for r in rows)))
               for col in rows[0]]
    print_columns(console, columns, keys=1, width=console.width if terminal else None)


def freeze_startup_heap() -> None:
    """Hide the objects alive now from the garbage collector for the rest of the process.

    After the imports a sweep process holds ~170k long-lived objects
    (LangChain, LangGraph, pydantic schemas). Every full collection walked
    them all: a ~100 ms pause of every run in flight, about once per hundred
    runs, landing on whichever runs were then executing. They live as long
    as the process anyway. Only for a process the command owns (the CLI):
    frozen objects are never freed.
    """
    gc.collect()
    gc.freeze()


def benchmark_names(given: list[str] | None) -> list[str]:
    """The benchmarks ``--benchmark`` names: a comma list, as ``--systems`` takes, and the flag repeatable; each
    name once, in the order given.

    >>> benchmark_names(["arith,gsm8k", "mbpp", "arith"])
    ['arith', 'gsm8k', 'mbpp']
    """
    return list(dict.fromkeys(name for item in given or [] for name in _csv(item)))


def sweep_request(args: argparse.Namespace) -> ExperimentRequest:
    """The sweep ``run`` asks for: the effective config and the request built from its flags."""
    from mas.sweep.experiment import ExperimentRequest
    from mas.sweep.selection import TaskSelection, parse_task_ids

    cfg = load_effective_config(args)
    selection = TaskSelection(ids=parse_task_ids(args.task_ids) if args.task_ids else None, shuffle=args.shuffle,
                              stratify=args.stratify)
    req = ExperimentRequest(cfg=cfg, benchmarks=benchmark_names(args.benchmark), systems=_csv(args.systems),
                            task_limit=args.task_limit, runs_per_task=args.runs_per_task,
                            executor=args.executor, scheduler_address=args.scheduler_address, workers=args.workers,
                            progress=args.progress, retry_errors=args.retry_errors, selection=selection,
                            models=_csv(args.models) if args.models else list(cfg.sweep_models))
    if args.experiment_id is not None:  # an empty id is refused, not replaced by a timestamp
        req.experiment_id = args.experiment_id
    return req


def execute_sweep(req: ExperimentRequest) -> list[RunResult] | int:
    """Run (or resume) the sweep; its results, or the exit status when it was interrupted."""
    from mas.sweep.experiment import SweepInterrupted, SweepOverBudget, run_experiment

    freeze_startup_heap()
    try:
        return asyncio.run(run_experiment(req))
    except SweepInterrupted as err:
        print(f"interrupted: {err}", file=sys.stderr)
        return err.exit_code
    except SweepOverBudget as err:  # what ran is summarised; the status says the sweep is not done
        report_sweep(req, err.results)
        print(f"stopped: {err}", file=sys.stderr)
        return EXIT_OVER_BUDGET


def report_sweep(req: ExperimentRequest, results: list[RunResult]) -> int:
    """Summarise the finished sweep (files and the console table); the command's exit status."""
    print(f"wrote {len(results)} runs under {req.experiment_root}")
    from descriptor.cli import print_summary
    from descriptor.report import write_report
    from descriptor.summaries import summarize_experiment

    print_summary(summarize_experiment(req.experiment_root))
    print(f"summaries: {req.experiment_root / 'experiment_summary.csv'}")
    from descriptor.report.cli import print_report

    print_report(write_report(req.experiment_root))
    from mas.sweep.experiment import scripted_notes

    for note in scripted_notes(req.cfg, list(req.benchmarks), list(req.systems)):
        print(note, file=sys.stderr)
    from descriptor.redact import redact

    for system, failed in systems_failing_on_their_own(results).items():
        print(redact(f"warning: every run of {system} ended in an error of the system's own ({len(failed)} runs; "
                     f"first: {failed[0].run_id}: {(failed[0].error or '')[:300]}). They count as failed tasks; "
                     "if the error is a bug in the system's code, fix it and run again with a new experiment id"),
              file=sys.stderr)
    errored = [r for r in results if r.status == "error"]
    if errored:
        print(redact(f"error: {len(errored)} run(s) ended in an infrastructure error (model calls that failed for "
                     f"good; first: {errored[0].run_id}: {(errored[0].error or '')[:300]}); they are no task results. "
                     "Run the same command again to retry them (see the manifest's attempts; --retry-errors N allows "
                     "more retries)"), file=sys.stderr)
        return EXIT_RUN_ERRORS
    return 0


def systems_failing_on_their_own(results: list[RunResult]) -> dict[str, list[RunResult]]:
    """System -> its runs, for each system whose every run finished with an error of its own (a graph exception,
    not a run limit): what a bug in a system's code looks like, which the summary shows only as success 0."""
    by_system: dict[str, list[RunResult]] = {}
    for r in results:
        by_system.setdefault(r.system, []).append(r)
    return {s: rs for s, rs in sorted(by_system.items())
            if all(r.status == "finished" and r.error is not None and r.limit is None for r in rs)}


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: the sweep, what the registered hooks do after it (``--rollback``), then its summary."""
    from mas.logging import configure_logging
    from mas.sweep.hooks import SWEEP_HOOKS

    configure_logging()
    req = sweep_request(args)
    after = [then for _, hook in SWEEP_HOOKS.items() if (then := hook.prepare(args, req)) is not None]
    results = execute_sweep(req)
    if isinstance(results, int):
        return results
    status = max([then(results) for then in after], default=0)
    return max(status, report_sweep(req, results))


EXIT_RUN_ERRORS = 1
"""Exit status of ``run`` when some runs ended in an infrastructure error (2 is bad input)."""
EXIT_OVER_BUDGET = 3
"""Exit status of ``run`` when the sweep stopped at ``limits.sweep_cost_usd`` with runs not started."""


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments shared by ``run`` and the sweep commands."""
    p.add_argument("--config", help="experiment TOML (default: built-in defaults)")
    p.add_argument("--benchmark", action="append", metavar="NAME[,NAME]",
                   help="comma-separated benchmarks (repeatable): a name from list-benchmarks, a [datasets.NAME] of "
                        "the config, or an Inspect AI task: inspect:FILE.py@TASK or inspect:REGISTRY/NAME")
    p.add_argument("--task-limit", type=int, default=3, help="tasks per benchmark (default 3)")
    p.add_argument("--runs-per-task", type=int, default=1, help="repeated runs per task and system (default 1)")
    p.add_argument("--task-ids", metavar="IDS|FILE",
                   help="exactly these tasks (id,id,... or a file with one id a line); --task-limit does not apply")
    p.add_argument("--shuffle", action="store_true",
                   help="pick tasks from a permutation seeded by the experiment seed (stable when resumed)")
    p.add_argument("--stratify", metavar="FIELD",
                   help="allocate --task-limit tasks to the values of the tasks' metadata FIELD in proportion "
                        "(e.g. workbench: source)")
    p.add_argument("--systems", default="sas", help="comma-separated systems (default: sas)")
    p.add_argument("--model", help="route for every role: scripted, embedded, or a [models.NAME] route")
    p.add_argument("--models", metavar="ROUTE,ROUTE",
                   help="a model matrix: every system on each of these routes, compared as (system, model) units "
                        "(config sweep_models); roles that name another route keep it")
    p.add_argument("--output-root", help="artifact root directory (default from config: artifacts)")
    p.add_argument("--experiment-id", help="experiment directory name (default: a UTC timestamp)")
    p.add_argument("--seed", type=int, help="base seed")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any config key with a TOML value, e.g. --set mas.max_rounds=2 "
                        "--set models.default.temperature=0.0 (repeatable)")
    p.add_argument("--concurrency", type=positive_int, help="runs at once")
    p.add_argument("--cache", choices=("off", "read", "write", "readwrite"),
                   help="response cache (config cache.mode; default off): reuse and/or store model replies in SQLite")
    p.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="where runs execute: local (asyncio, default) or dask (see mas/sweep/executors.py)")
    p.add_argument("--scheduler-address", metavar="ADDR",
                   help="dask scheduler, e.g. tcp://host:8786 (default: an in-process LocalCluster)")
    p.add_argument("--workers", type=int, default=1,
                   help="dask without --scheduler-address: worker processes on this machine (default 1, "
                        "in-process); each gets 1/N of every route's rate limits")
    p.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto",
                   help="auto: a progress bar on a terminal, periodic log lines otherwise")
    p.add_argument("--inject-errors", type=float, metavar="RATE",
                   help="scripted model only: fraction of runs that get one wrong step")
    p.add_argument("--retry-errors", type=nonnegative_int, default=DEFAULT_RETRY_ERRORS, metavar="N",
                   help="times a run that ended in an infrastructure error (model calls that failed for good) is "
                        f"run again by later invocations of the same sweep (default {DEFAULT_RETRY_ERRORS})")
    p.add_argument("--inject-position", choices=("left", "mid", "right", "uniform"),
                   help="scripted model only: put the injected error in the first, middle or last part of each "
                        "run's steps (dense there), or uniformly over them (default: one of the first four steps)")


def cmd_list_systems(args: argparse.Namespace) -> int:
    """``list-systems``: one registered system a line with what it does (``--names``: the names alone; ``--long``:
    its roles and where it comes from, tab-separated)."""
    from descriptor.describe import listing, terminal_width
    from mas.systems import SYSTEMS

    if args.long or args.names:
        for name, topology in SYSTEMS.items():
            print(f"{name}\t{','.join(topology.role_names())}\t{SYSTEMS.origin(name)}" if args.long else name)
        return 0
    print(listing([(name, topology.summary()) for name, topology in SYSTEMS.items()], terminal_width()))
    return 0


def cmd_studio_config(args: argparse.Namespace) -> int:
    """``studio-config``: the ``langgraph.json`` serving every registered system, on stdout or to ``--out``."""
    import json

    from descriptor.io import write_text_atomic
    from mas.studio import langgraph_spec

    text = json.dumps(langgraph_spec(), indent=2) + "\n"
    if args.out is None:
        print(text, end="")
    else:
        write_text_atomic(args.out, text)
        print(f"wrote {args.out}")


EXAMPLE_CONFIG = "data/experiment.example.toml"
"""The example config inside the package (``config/experiment.example.toml`` of the checkout, linked)."""


def init_config(path: str | Path) -> Path:
    """Write the example experiment config to ``path``; UserError when something is there already.

    Written to a temporary file and linked into place, so ``path`` is either absent or complete, and a file
    that appears meanwhile is not overwritten either.
    """
    from importlib import resources

    from descriptor.errors import UserError

    target = Path(path)
    if target.exists() or target.is_symlink():
        raise UserError(f"init-config: {target} exists; not overwritten (remove it or give another PATH)")
    if not target.parent.is_dir():
        raise UserError(f"init-config: {target.parent} is not a directory")
    data = resources.files("mas").joinpath(EXAMPLE_CONFIG).read_bytes()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.link(tmp, target)
    except FileExistsError:
        raise UserError(f"init-config: {target} exists; not overwritten (remove it or give another PATH)") from None
    finally:
        os.unlink(tmp)
    return target


def cmd_init_config(args: argparse.Namespace) -> int:
    print(f"wrote {init_config(args.path)}: edit it, then `run --config {args.path}`")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from mas.sweep.hooks import SWEEP_HOOKS

    p = sub.add_parser("list-systems", help="list the systems (topologies) a run can use, plugins' included")
    p.add_argument("--long", action="store_true", help="also each system's roles and where it is registered")
    p.add_argument("--names", action="store_true", help="the names alone, one a line (for scripts)")
    p.set_defaults(func=cmd_list_systems)
    p = sub.add_parser("studio-config", help="write langgraph.json serving every registered system in Studio")
    p.add_argument("--out", help="file to write (default: print it), e.g. langgraph.json")
    p.set_defaults(func=cmd_studio_config)

    p = sub.add_parser("run", help="run benchmarks × systems × tasks × runs and write artifacts")
    add_run_arguments(p)
    for _, hook in SWEEP_HOOKS.items():
        hook.add_arguments(p)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("init-config", help="write the example experiment config (every key, commented)")
    p.add_argument("path", nargs="?", default="experiment.toml",
                   help="where to write it (default: experiment.toml); an existing file is never overwritten")
    p.set_defaults(func=cmd_init_config)
