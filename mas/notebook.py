"""The Python face for notebooks: a sweep with keyword arguments, and its files as pandas DataFrames.

``run_experiment`` takes the options of ``mas-econ run`` as keyword arguments (``--task-limit 2`` is
``task_limit=2``; a flag is ``True``; a comma list or a repeatable option takes a list; ``set`` takes a dict)
and checks them with the command's own parser, so a notebook and the CLI accept the same things. It runs the
sweep, the registered post-sweep hooks (``rollback="conformal"`` when attribution is installed), writes the
summaries and the report, and returns the experiment directory. Inside a running event loop (Jupyter) the
sweep runs in a worker thread. ``load_runs``/``load_events``/``to_parquet`` read that directory back
(:mod:`descriptor.frames`).

>>> from mas.notebook import run_experiment, load_runs
>>> root = run_experiment(benchmark="arith", systems=["sas", "debate"], model="scripted", task_limit=2,
...                       output_root="artifacts", experiment_id="nb", progress="none")   # doctest: +SKIP
>>> load_runs(root).groupby("system")["success"].mean()                                   # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from descriptor.errors import UserError
from descriptor.frames import load_events, load_runs, to_parquet
from descriptor.registry import load_plugins

__all__ = ["load_events", "load_runs", "run_experiment", "run_options", "to_parquet"]

T = TypeVar("T")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the notebook's kernel
        raise UserError(f"run_experiment: {message} (options are keyword arguments: task_limit=2 for --task-limit 2)")


def _parser() -> _Parser:
    """``mas-econ run``'s parser: the run arguments and every registered sweep hook's."""
    from mas.sweep.options import add_run_arguments
    from mas.sweep.hooks import SWEEP_HOOKS

    p = _Parser(prog="run_experiment", add_help=False)
    add_run_arguments(p)
    for _, hook in SWEEP_HOOKS.items():
        hook.add_arguments(p)
    return p


def _argv(p: argparse.ArgumentParser, options: Mapping[str, Any]) -> list[str]:
    """The command line ``options`` stand for (keyword name -> its option, values written as the CLI takes them)."""
    actions = {a.dest: a for a in p._actions if a.option_strings}
    argv: list[str] = []
    for key, value in options.items():
        action = actions.get(key)
        if action is None:
            raise UserError(f"run_experiment: unknown option {key!r}; known: {', '.join(sorted(actions))}")
        flag = action.option_strings[-1]
        if isinstance(action, argparse._StoreTrueAction):
            argv += [flag] if value else []
        elif value is None:
            continue
        elif key == "set" and isinstance(value, Mapping):  # TOML values: JSON writes numbers, strings, lists alike
            argv += [x for k, v in value.items() for x in (flag, f"{k}={json.dumps(v)}")]
        elif isinstance(action, argparse._AppendAction):
            argv += [x for v in ([value] if isinstance(value, str) else value) for x in (flag, str(v))]
        elif isinstance(value, list | tuple):
            argv += [flag, ",".join(map(str, value))]
        else:
            argv += [flag, str(value)]
    return argv


def run_options(**options: Any) -> argparse.Namespace:
    """The parsed ``run`` arguments ``options`` stand for (what :func:`run_experiment` runs); UserError naming a
    wrong option.

    >>> args = run_options(benchmark="arith", systems=["sas", "debate"], task_limit=2, set={"mas.max_rounds": 2})
    >>> args.benchmark, args.systems, args.task_limit, args.set
    (['arith'], 'sas,debate', 2, ['mas.max_rounds=2'])
    """
    p = _parser()
    return p.parse_args(_argv(p, options))


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end; in a worker thread when this thread already runs an event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def run_experiment(*, plugins: list[str] | tuple[str, ...] = (), report: bool = True, **options: Any) -> Path:
    """Run (or resume) the sweep ``mas-econ run`` would with these options; returns the experiment directory.

    ``plugins``: modules to import first (``--plugin``). ``report``: also write ``report/index.html``. Runs that
    ended in an infrastructure error are in the files with ``status == "error"`` (the CLI exits 1 for them);
    a sweep stopped by a signal or by ``limits.sweep_cost_usd`` raises the sweep's own exception.
    """
    from descriptor.summaries import summarize_experiment
    from mas.sweep.options import sweep_request
    from mas.sweep.experiment import run_experiment as run_sweep
    from mas.sweep.hooks import SWEEP_HOOKS

    load_plugins(plugins)
    args = run_options(**options)
    req = sweep_request(args)
    after = [then for _, hook in SWEEP_HOOKS.items() if (then := hook.prepare(args, req)) is not None]
    results = _run(run_sweep(req))
    for then in after:
        then(results)
    summarize_experiment(req.experiment_root)
    if report:
        from descriptor.report import write_report

        write_report(req.experiment_root)
    return req.experiment_root
