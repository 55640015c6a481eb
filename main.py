"""Command-line entry point: ``python main.py COMMAND --help``.

Each command lives in a ``cli`` module next to the library code it calls;
this file only collects them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn

# Modules that define ``register(subparsers)``; each adds its own commands. Order matters once:
# attribution.cli_sweep extends mas.cli's ``run`` with --rollback (mas must not import attribution).
COMMAND_MODULES = (
    "benchmark.cli",
    "mas.cli",
    "mas.serving.cli",
    "mas.otel.cli",
    "descriptor.cli",
    "descriptor.report.cli",
    "attribution.cli",
    "attribution.cli_conformal",
    "attribution.cli_rollback",
    "attribution.cli_sweep",
)


class OneLineErrors(argparse.ArgumentParser):
    """Bad flags end like every other user error: one line naming the option and what was expected, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="main.py",
        description="LangGraph multi-agent runtime: experiments, descriptors, failure attribution.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Make Ctrl-C / SIGINT raise KeyboardInterrupt at once for the whole command, then restore the old handler.

    Two reasons. A shell starts a background job (``main.py ... &``, as
    scripts/full_experiment.sh does) with SIGINT ignored, so a forwarded
    Ctrl-C was dropped until the sweep installed its own handler. And
    ``asyncio.run`` replaces Python's ``default_int_handler`` (by identity)
    with one that only cancels the main task, which waits for the next
    ``await``: validation, task loading and embedded server start-up (up to
    minutes) are blocking code, so Ctrl-C would wait for them to end. A
    handler of our own is left alone by ``asyncio.run``; the sweep still
    installs its clean-stop handler on top while runs execute.
    """
    if threading.current_thread() is not threading.main_thread():  # signal handlers: main thread only
        yield
        return
    previous = signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit status 0 ok, 2 bad input (a plain message), 130 on Ctrl-C."""
    # Installed before the (slow) imports of the command modules, so no Ctrl-C is lost to them either.
    with interruptible():
        try:
            return _dispatch(argv)
        except KeyboardInterrupt:
            # A terminal Ctrl-C can reach us twice (directly and forwarded by a wrapper script):
            # the second one must not turn the clean exit into a traceback.
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            print("interrupted", file=sys.stderr)
            return 130


def _dispatch(argv: list[str] | None) -> int:
    from mas.logging import configure_logging, redacted_std_streams

    configure_logging()  # every command's logs go to stderr with secrets redacted
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, or a bad flag (already reported in one line)
        return done.code if isinstance(done.code, int) else 2
    from descriptor.errors import UserError, disk_full, disk_full_message
    from descriptor.redact import redact

    try:
        with redacted_std_streams():
            return int(args.func(args) or 0)
    except UserError as err:
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 2
    except OSError as err:
        if (full := disk_full(err)) is None:
            raise
        print(f"error: {redact(disk_full_message(full))}; free some space and run the same command again",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
