"""Command-line entry point: ``python main.py COMMAND --help``.

Each command lives in a ``cli`` module next to the library code it calls;
this file only collects them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that define ``register(subparsers)``; each adds its own commands.
COMMAND_MODULES = (
    "mas.cli",
    "mas.cli_model",
    "descriptor.cli",
    "attribution.cli",
    "attribution.cli_conformal",
    "attribution.cli_rollback",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="LangGraph multi-agent runtime: experiments, descriptors, failure attribution.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # not written yet; any other missing module is a real error
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from mas.errors import UserError

    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
