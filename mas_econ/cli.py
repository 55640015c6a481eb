"""The ``mas-econ`` command (also ``python main.py``): the top stage, every stage's commands in one.

Each stage declares its commands in its light ``commands`` module (:mod:`descriptor.commands`): the line ``--help``
lists and the function that fills the command's parser. This module imports those declarations, lists every
command, and imports only the module of the command that runs (with the modules that add options to it), so a
command's start-up does not pay for the others' imports. It imports every stage; no stage imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import NoReturn

from descriptor.commands import COMMANDS, Command, hooks_of

STAGES = ("benchmark", "mas", "descriptor", "attribution")
"""The stages whose ``commands`` modules declare commands, in the order ``--help`` lists them (the order of the
work: tasks, runs, what is computed from the run files, attribution); each stage's commands in the order it
declares them, then the plugins'."""


def _declare() -> None:
    """Import the stages' declarations (each stage's ``commands`` module)."""
    for stage in STAGES:
        importlib.import_module(f"{stage}.commands")


def commands() -> list[tuple[str, Command]]:
    """Every declared command, the stages' (in :data:`STAGES` order) and then the plugins', with its declaration."""
    _declare()
    declared = [(name, COMMANDS.get(name)) for name in COMMANDS.names(in_order=True)]

    def rank(module: str) -> int:
        return next((i for i, s in enumerate(STAGES) if module == s or module.startswith(s + ".")), len(STAGES))

    return sorted(declared, key=lambda item: rank(item[1].module))  # stable: declaration order within a stage


def chosen(argv: list[str]) -> str | None:
    """The command ``argv`` (without ``--plugin`` options) names: its first word that is no option, when declared;
    None for ``--help`` or ``--version`` before it, or an unknown word (the parser then lists the commands or names
    the word)."""
    # The top-level parser has no option taking a value once --plugin is removed: the first word is the command.
    for word in argv:
        if word in ("-h", "--help", "--version"):
            return None
        if not word.startswith("-"):
            break
    else:
        return None
    _declare()
    # a stage's (or a --plugin module's) command is found without reading every distribution's entry points
    return word if COMMANDS.peek(word) is not None or word in COMMANDS else None


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


def _top(prog: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The top-level parser and its (empty) set of commands."""
    parser = OneLineErrors(
        prog=prog,
        description="LangGraph multi-agent runtime: experiments, descriptors, failure attribution.",
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--plugin", action="append", metavar="MODULE",
                        help="import MODULE first (repeatable; before or after the command): code that is not "
                             "installed registering benchmarks, systems, methods, scorers or commands; the config "
                             "key plugins does the same")
    return parser, parser.add_subparsers(dest="command", required=True, metavar="COMMAND")


def _add(sub: argparse._SubParsersAction, name: str, command: Command, fill: bool) -> None:
    """Add command ``name`` with its ``--help`` line; ``fill``: its parser filled by its own module, after the
    modules adding options to it are imported (they register their options on import)."""
    parser = sub.add_parser(name, help=command.help)
    if fill:
        for module in hooks_of(name):
            importlib.import_module(module)
        command.fill(parser)


def build_parser(prog: str = "main.py", fill: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser listing every command, with the parsers of the commands in ``fill`` filled (all by default: the
    reference the docs print); a command not filled has its ``--help`` line only."""
    parser, sub = _top(prog)
    declared = commands()
    wanted = {name for name, _ in declared} if fill is None else set(fill)
    for name, command in declared:
        _add(sub, name, command, name in wanted)
    return parser


def command_parser(prog: str, name: str) -> argparse.ArgumentParser:
    """The parser of command ``name`` alone, filled: what runs a command (listing the others would read every
    installed distribution's entry points for the plugins' commands, 10-60 ms of each start-up)."""
    parser, sub = _top(prog)
    _add(sub, name, COMMANDS.peek(name) or COMMANDS.get(name), True)
    return parser


def load_plugin_options(argv: list[str]) -> list[str]:
    """Import the ``--plugin MODULE`` modules named anywhere in ``argv``; the other arguments.

    Plugins load before the parser is built, so what they register (a benchmark, a system, a method, a hook, a
    command) is known to every command, its choices and its help. The parser keeps ``--plugin`` for ``--help`` only.
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
            name = chosen(rest)
            parser = build_parser(prog, fill=()) if name is None else command_parser(prog, name)
            args = parser.parse_args(rest)
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
