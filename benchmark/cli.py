"""Commands: ``list-benchmarks``, ``benchmark-info``, ``benchmark-check``.

Benchmark options come from ``[benchmarks.<name>]`` of an experiment config
(``--config``; only that table is read here, the rest is the runtime's) and
from ``--set benchmarks.<name>.<option>=VALUE`` (a TOML value, or plain text).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from benchmark.dataset_spec import beside
from descriptor.errors import UserError
from descriptor.redact import redact


def benchmark_options(name: str, config: str | None, sets: list[str] | None = None) -> dict[str, Any]:
    """The options for benchmark ``name``: ``[benchmarks.<name>]`` of ``config``, then ``--set`` overrides."""
    options: dict[str, Any] = {}
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise UserError(f"{path}: config file not found")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise UserError(f"{path}: malformed TOML: {err}") from None
        except RecursionError:  # tomllib recurses once per nested array or inline table
            raise UserError(f"{path}: malformed TOML: arrays or inline tables nested too deeply") from None
        tables = data.get("benchmarks", {})
        section = tables.get(name, {}) if isinstance(tables, dict) else None
        if not isinstance(section, dict):
            raise UserError(f"{path}: [benchmarks.{name}] must be a table of options")
        options.update(section)
        datasets = data.get("datasets", {})
        dataset = datasets.get(name) if isinstance(datasets, dict) else None
        if isinstance(dataset, dict):  # a plain dataset of the config (benchmark/dataset.py)
            options.update(dataset, adapter="dataset")
            if isinstance(dataset.get("path"), str):
                options["path"] = beside(dataset["path"], path.parent)
    prefix = f"benchmarks.{name}."
    for item in sets or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.startswith(prefix) or len(key) == len(prefix):
            raise UserError(f"--set {item!r}: expected {prefix}OPTION=VALUE")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except (tomllib.TOMLDecodeError, RecursionError):
            value = raw
        options[key[len(prefix):]] = value
    return options


def config_datasets(config: str | None) -> list[str]:
    """The names of the ``[datasets.<name>]`` tables of ``config`` (none without one)."""
    if config is None:
        return []
    try:
        datasets = tomllib.loads(Path(config).read_text(encoding="utf-8")).get("datasets", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
        return []  # benchmark_options names the problem
    return sorted(datasets) if isinstance(datasets, dict) else []


def _bench(args: argparse.Namespace):  # -> Benchmark
    from benchmark.registry import get_benchmark, spec_benchmark

    name, options = spec_benchmark(args.benchmark) or (args.benchmark, {})
    return get_benchmark(name, {**options, **benchmark_options(name, args.config, args.set)})


def cmd_list_benchmarks(args: argparse.Namespace) -> int:
    from benchmark.registry import BENCHMARKS, generic_adapters, list_benchmarks, unavailable_reason
    from descriptor.describe import describe, listing, terminal_width

    described = []
    for name in [*list_benchmarks(), *config_datasets(args.config)]:
        options = benchmark_options(name, args.config, [i for i in args.set or [] if i.startswith(f"benchmarks.{name}.")])
        if args.available and (reason := unavailable_reason(name, options)) is not None:
            print(redact(f"skipped {name}: {reason}"), file=sys.stderr)
            continue
        cls = BENCHMARKS[name] if name in BENCHMARKS else generic_adapters()["dataset"]
        if args.long:
            print(f"{name}\t{cls.answer_kind}\t{cls.success_definition}\t{cls.license}")
        elif args.names:
            print(name)  # one name a line: scripts/full_experiment.sh reads this
        else:
            described.append((name, describe(cls)))
    if described:
        print(listing(described, terminal_width()))
    return 0


def cmd_benchmark_info(args: argparse.Namespace) -> int:
    bench = _bench(args)
    info = bench.info()
    info["options_given"] = dict(bench.options)
    info["example_task"] = bench.load_tasks(1)[0].question
    print(redact(json.dumps(info, indent=2, ensure_ascii=False)))  # the options may hold a URL's password
    return 0


def cmd_benchmark_check(args: argparse.Namespace) -> int:
    from benchmark.check import check_benchmark

    if args.task_limit is not None and args.task_limit < 1:
        raise UserError(f"--task-limit: expected a positive number of tasks, got {args.task_limit}")
    report = check_benchmark(_bench(args), limit=args.task_limit)
    if report.oracle_failures:
        print(f"oracle failed on {len(report.oracle_failures)} task(s): {', '.join(report.oracle_failures)}",
              file=sys.stderr)
    if report.empty_passes_with_reference_actions:
        print(f"empty solved {len(report.empty_passes_with_reference_actions)} task(s) whose reference actions "
              f"change nothing: {', '.join(report.empty_passes_with_reference_actions)}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.summary()))
    else:
        print(f"{args.benchmark}: oracle solved {report.oracle_solved}/{report.n}, "
              f"empty solved {report.empty_solved}/{report.n}")
        if report.oracle_problems:
            summary = report.summary()
            print(f"{args.benchmark} problems (every sub-step solved): oracle {summary['oracle_problems_solved']}/"
                  f"{summary['problems']}, empty {summary['empty_problems_solved']}/{summary['problems']}")
    if report.untargeted:  # on stderr beside the other warnings, so --json stays one object
        print(f"tests compare no target in {len(report.untargeted)} task(s): {', '.join(report.untargeted)} "
              "(a pass checks properties of the answer, not the reference's values; the report marks them)",
              file=sys.stderr)
    return 0


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True,
                   help="benchmark name (see list-benchmarks), a [datasets.NAME] of --config, or inspect:FILE.py@TASK")
    p.add_argument("--config", help="experiment TOML; its [benchmarks.<name>] table gives the benchmark's options")
    p.add_argument("--set", action="append", metavar="benchmarks.NAME.OPTION=VALUE",
                   help="override one benchmark option with a TOML value (repeatable)")


def list_benchmarks_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``list-benchmarks``'s parser."""
    p.add_argument("--long", action="store_true", help="also answer kind, success definition and licence")
    p.add_argument("--names", action="store_true", help="the names alone, one a line (for scripts)")
    p.add_argument("--available", action="store_true",
                   help="only benchmarks whose data (or package) is installed; the others on stderr with the reason")
    p.add_argument("--config", help="experiment TOML; with --available, its [benchmarks.<name>] tables give the "
                                    "options (browsecomp is available once its data_path and corpus_path are set)")
    p.add_argument("--set", action="append", metavar="benchmarks.NAME.OPTION=VALUE",
                   help="override one benchmark option with a TOML value (repeatable)")
    p.set_defaults(func=cmd_list_benchmarks)


def benchmark_info_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``benchmark-info``'s parser."""
    _add_options(p)
    p.set_defaults(func=cmd_benchmark_info)


def benchmark_check_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``benchmark-check``'s parser."""
    _add_options(p)
    p.add_argument("--task-limit", type=int, help="check only the first N tasks (default: all)")
    p.add_argument("--json", action="store_true", help='print {"n", "oracle_solved", "empty_solved"} as JSON')
    p.set_defaults(func=cmd_benchmark_check)
