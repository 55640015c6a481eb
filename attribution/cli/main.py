"""The ``mas-econ`` command (also ``python main.py``): every stage's commands, collected.

Each command lives in a ``cli`` module next to the library code it calls;
this module only collects them. It sits in the top stage because it loads
every stage's commands (``mas`` must not know ``attribution``'s).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn

# Modules that define ``register(subparsers)``, each adding its own commands, or register hooks into another
# command when imported (attribution.cli.sweep: ``run --rollback``, as mas.sweep.hooks.SWEEP_HOOKS; mas must not
# import attribution). All are imported before any parser is built, so their order does not matter.
COMMAND_MODULES = (
    "benchmark.cli",
    "mas.cli",
    "mas.llm.cache_cli",
    "mas.serving.cli",
    "mas.otel.cli",
    "descriptor.cli",
    "descriptor.plan_cli",
    "descriptor.report.cli",
    "descriptor.report.view_cli",
    "attribution.cli.attribute",
    "attribution.cli.conformal",
    "attribution.cli.rollback",
    "attribution.cli.sweep",
)

COMMANDS = {
    "list-benchmarks": "benchmark.cli", "benchmark-info": "benchmark.cli", "benchmark-check": "benchmark.cli",
    "list-systems": "mas.cli", "studio-config": "mas.cli", "run": "mas.cli", "init-config": "mas.cli",
    "cache": "mas.llm.cache_cli", "model": "mas.serving.cli", "export-otel": "mas.otel.cli",
    "summarize-experiment": "descriptor.cli", "plan": "descriptor.plan_cli", "report": "descriptor.report.cli",
    "view": "descriptor.report.view_cli",
    "attribute": "attribution.cli.attribute", "score-steps": "attribution.cli.attribute",
    "conformal": "attribution.cli.conformal", "calibrate": "attribution.cli.conformal",
    "predict-set": "attribution.cli.conformal",
    "rollback": "attribution.cli.rollback", "rollback-experiment": "attribution.cli.rollback",
    "label-failures": "attribution.cli.rollback",
}
"""Command -> the module registering it: a command's parser is built from its own module only. Why: importing
all of :data:`COMMAND_MODULES` (numpy and pydantic models for the conformal and rollback options) was ~0.6 s of
CPU of every command's start-up, half of ``summarize-experiment`` on a small experiment.
``tests/test_cli_startup.py`` checks this table against the modules."""

HOOKED = {"mas.cli": ("attribution.cli.sweep",)}
"""Modules whose commands take options from hooks, with the modules registering those hooks when imported."""


def command_modules(argv: list[str]) -> tuple[str, ...]:
    """The modules to import for ``argv``: its command's (and their hooks'), or all for ``--help`` or an unknown
    command (the full parser then lists the commands or names the wrong one)."""
    # The top-level parser has no option taking a value once --plugin is removed: the first word is the command.
    name = next((a for a in argv if not a.startswith("-")), None)
    if name not in COMMANDS:
        return COMMAND_MODULES
    return (COMMANDS[name], *HOOKED.get(COMMANDS[name], ()))


class OneLineErrors(argparse.ArgumentParser):
    """Bad flags end like every other user error: one line naming the option and what was expected, exit 2."""

    def error(self, message: str) -> NoReturn:
        from descriptor.redact import redact

        # argparse quotes the bad value, which may be a key pasted into the wrong flag
        self.exit(2, redact(f"error: {self.prog}: {message} (see {self.prog} --help)\n"))


class VersionAction(argparse.Action):
    """``--version``: the version and git commit, computed only when asked (the commit runs git)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and git commit, then exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        print(version_text())
        parser.exit(0)


def version_text() -> str:
    """``mas-econ 0.1.0 (git abc123...)``, or with the reason the commit is unknown."""
    from importlib import metadata

    from mas.sweep.provenance import git_commit

    try:
        version = metadata.version("mas-econ")
    except metadata.PackageNotFoundError:
        version = "unknown (mas-econ is not installed; running from source)"
    sha, reason = git_commit()
    return f"mas-econ {version} (git {sha})" if sha else f"mas-econ {version} (git commit unknown: {reason})"


def build_parser(prog: str = "main.py", modules: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser of the commands ``modules`` register (all by default)."""
    parser = OneLineErrors(
        prog=prog,
        description="LangGraph multi-agent runtime: experiments, descriptors, failure attribution.",
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--plugin", action="append", metavar="MODULE",
                        help="import MODULE first (repeatable; before or after the command): code that is not "
                             "installed registering benchmarks, systems, methods or scorers; the config key "
                             "plugins does the same")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    loaded = [importlib.import_module(name) for name in modules]  # hooks register on import
    for module in loaded:
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def load_plugin_options(argv: list[str]) -> list[str]:
    """Import the ``--plugin MODULE`` modules named anywhere in ``argv``; the other arguments.

    Plugins load before the parser is built, so what they register (a benchmark, a system, a method, a hook)
    is known to every command, its choices and its help. The parser keeps ``--plugin`` for ``--help`` only.
    """
    from descriptor.registry import load_plugins

    pre = OneLineErrors(prog="main.py", add_help=False, allow_abbrev=False)
    pre.add_argument("--plugin", action="append", default=[])
    known, rest = pre.parse_known_args(argv)
    load_plugins(known.plugin)
    return rest


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


def main(argv: list[str] | None = None, *, prog: str = "main.py") -> int:
    """Run one command; exit status 0 ok, 2 bad input (a plain message), 130 on Ctrl-C."""
    # Installed before the (slow) imports of the command modules, so no Ctrl-C is lost to them either.
    with interruptible():
        try:
            return _dispatch(argv, prog)
        except KeyboardInterrupt:
            # A terminal Ctrl-C can reach us twice (directly and forwarded by a wrapper script):
            # the second one must not turn the clean exit into a traceback.
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            print("interrupted", file=sys.stderr)
            return 130


def _dispatch(argv: list[str] | None, prog: str) -> int:
    from mas.logging import configure_logging

    from descriptor.errors import UserError, bad_path, disk_full, disk_full_message
    from descriptor.redact import redact

    configure_logging()  # every command's logs go to stderr with secrets redacted
    try:
        try:
            rest = load_plugin_options(sys.argv[1:] if argv is None else argv)  # before the parser: they extend it
            args = build_parser(prog, command_modules(rest)).parse_args(rest)
        except SystemExit as done:  # --help, or a bad flag (already reported in one line)
            return done.code if isinstance(done.code, int) else 2
        return int(args.func(args) or 0)
    except UserError as err:  # also a plugin that does not import, or an installed one that does not load
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 2
    except OSError as err:
        if (said := bad_path(err)) is not None:
            print(f"error: {redact(said)}", file=sys.stderr)
            return 2
        if (full := disk_full(err)) is None:
            raise
        print(f"error: {redact(disk_full_message(full))}; free some space and run the same command again",
              file=sys.stderr)
        return 2


def console(prog: str = "mas-econ") -> NoReturn:
    """The ``mas-econ`` console script (and ``python main.py``): a crash's traceback is printed with secrets
    redacted (an error's message may quote a key or a URL's password), exit status 1 as Python's own."""
    try:
        sys.exit(main(prog=prog))
    except BrokenPipeError:  # the reader went away (`mas-econ list-benchmarks | head -1`): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not raise again
        sys.exit(141)  # what a shell reports for a writer killed by SIGPIPE
    except Exception:  # noqa: BLE001 - printed like Python would, redacted
        from mas.logging import redacted_traceback

        sys.stderr.write(redacted_traceback())
        sys.exit(1)
