"""The runtime's commands: ``list-systems``, ``studio-config``, ``run``, ``init-config`` (declared in
:mod:`mas.commands`)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from mas.sweep.options import add_run_arguments, sweep_request

if TYPE_CHECKING:
    from descriptor.records import RunResult
    from mas.sweep.experiment import ExperimentRequest


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
    from descriptor.console_summary import print_summary
    from descriptor.report import write_report
    from descriptor.summaries import summarize_experiment

    print_summary(summarize_experiment(req.experiment_root))
    print(f"summaries: {req.experiment_root / 'experiment_summary.csv'}")
    from descriptor.report.build import print_report

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
    from descriptor.outputs import OutputKind, check_output
    from mas.studio import langgraph_spec

    if args.out is not None:
        check_output(args.out, OutputKind("langgraph.json", keys=frozenset({"graphs"})))
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
    from descriptor.outputs import OutputKind, check_output

    check_output(target, OutputKind("experiment config"), flag="init-config")  # not into an experiment's files
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


def list_systems_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``list-systems``'s parser."""
    p.add_argument("--long", action="store_true", help="also each system's roles and where it is registered")
    p.add_argument("--names", action="store_true", help="the names alone, one a line (for scripts)")
    p.set_defaults(func=cmd_list_systems)


def studio_config_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``studio-config``'s parser."""
    p.add_argument("--out", help="file to write (default: print it), e.g. langgraph.json")
    p.set_defaults(func=cmd_studio_config)


def run_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``run``'s parser."""
    from descriptor.registry import RegistryError
    from mas.sweep.hooks import SWEEP_HOOKS

    add_run_arguments(p)
    try:
        hooks = SWEEP_HOOKS.items()
    except RegistryError:  # a hook plugin that does not load: `run --help` still helps; cmd_run names the plugin
        hooks = []
    for _, hook in hooks:
        hook.add_arguments(p)
    p.set_defaults(func=cmd_run)


def init_config_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``init-config``'s parser."""
    p.add_argument("path", nargs="?", default="experiment.toml",
                   help="where to write it (default: experiment.toml); an existing file is never overwritten")
    p.set_defaults(func=cmd_init_config)
