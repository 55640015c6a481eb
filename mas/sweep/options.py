"""A sweep's options as ``run`` and :func:`mas.notebook.run_experiment` take them, and the request they make."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from descriptor.cliargs import nonnegative_int, positive_int
from mas.sweep.defaults import DEFAULT_RETRY_ERRORS

if TYPE_CHECKING:
    from mas.config import ExperimentConfig
    from mas.sweep.experiment import ExperimentRequest


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _routes(value: str) -> list[str]:
    """``--models ROUTE,ROUTE``: every name given, none empty (an empty list or a stray comma is a typo, not a
    request for the default route)."""
    from descriptor.errors import UserError

    names = [v.strip() for v in value.split(",")]
    if not any(names) or not all(names):
        raise UserError(f"--models {value!r}: expected route names separated by commas, none empty "
                        "(e.g. --models default,judge)")
    return names


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


def benchmark_names(given: list[str] | None) -> list[str]:
    """The benchmarks ``--benchmark`` names: a comma list, as ``--systems`` takes, and the flag repeatable; each
    name once, in the order given.

    >>> benchmark_names(["arith,gsm8k", "mbpp", "arith"])
    ['arith', 'gsm8k', 'mbpp']
    """
    return list(dict.fromkeys(name for item in given or [] for name in _csv(item)))


def workers_arg(text: str) -> int | str:
    """``--workers``: ``auto`` or an integer >= 1."""
    if text == "auto":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {text!r}") from None


def sweep_request(args: argparse.Namespace) -> ExperimentRequest:
    """The sweep ``run`` asks for: the effective config and the request built from its flags."""
    from descriptor.errors import UserError
    from mas.sweep.experiment import ExperimentRequest
    from mas.sweep.selection import TaskSelection, parse_task_ids

    cfg = load_effective_config(args)
    selection = TaskSelection(ids=parse_task_ids(args.task_ids) if args.task_ids is not None else None,
                              shuffle=args.shuffle, stratify=args.stratify)
    models = _routes(args.models) if args.models is not None else list(cfg.sweep_models)
    if args.model is not None and models:
        given = f"--models {args.models}" if args.models is not None else f"sweep_models = {models} (config)"
        raise UserError(f"--model {args.model} and {given}: --model puts one route on every role and replaces the "
                        "others, so there is no model matrix to compare; give one of them")
    req = ExperimentRequest(cfg=cfg, benchmarks=benchmark_names(args.benchmark), systems=_csv(args.systems),
                            task_limit=args.task_limit, runs_per_task=args.runs_per_task,
                            executor=args.executor, scheduler_address=args.scheduler_address, workers=args.workers,
                            progress=args.progress, retry_errors=args.retry_errors, selection=selection,
                            models=models)
    if args.experiment_id is not None:  # an empty id is refused, not replaced by a timestamp
        req.experiment_id = args.experiment_id
    return req


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
    p.add_argument("--workers", type=workers_arg, default=1,
                   help="worker processes on this machine running the runs (default 1: the sweep's own process); "
                        "each gets 1/N of every route's rate limits; auto: one per 16 runs in flight, at most one "
                        "per core (1 for the embedded model); for dask, without --scheduler-address")
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
