"""Command ``cache``: what the response cache holds and saved, emptying it, exporting it as JSONL."""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from descriptor.errors import UserError
from descriptor.outputs import OutputKind, check_output

if TYPE_CHECKING:
    from mas.llm.cache import ResponseCache

CACHE_EXPORT = OutputKind("cache export (JSON Lines)", keys=frozenset({"key", "reply"}), lines=True)
"""What ``cache export --out`` writes: one stored entry a line."""


def _cache_path(args: argparse.Namespace) -> Path:
    """The cache file named by ``--path``, else the config's ``cache.path``, else the default."""
    from mas.sweep.options import load_effective_config
    from mas.llm.cache import default_path

    if args.path:
        return Path(args.path).expanduser()
    cfg = load_effective_config(args)
    return Path(cfg.cache.path).expanduser() if cfg.cache.path else default_path()


def cmd_cache(args: argparse.Namespace) -> int:
    from mas.llm.cache import open_cache

    days = args.older_than_days
    if days is not None and (args.action != "clear" or not math.isfinite(days) or days < 0):
        raise UserError(f"--older-than-days {days:g}: expected a number of days >= 0, with `cache clear`"
                        if args.action == "clear" else "--older-than-days: only used with `cache clear`")
    path = _cache_path(args)
    if not path.is_file():  # clear too: emptying what is not there must not create it
        raise UserError(f"cache: no response cache at {path} (runs write one with --cache write or readwrite)")
    if args.action == "export" and args.out not in (None, "-"):
        check_output(args.out, CACHE_EXPORT, inputs=[path, getattr(args, "config", None)])
    cache = open_cache(path)  # a file that is not a cache: CacheFileError, one line
    try:
        return _act(args, cache, path)
    except sqlite3.DatabaseError as err:  # a database damaged past its header
        raise UserError(f"cache: {path}: cannot be read as a response cache ({err})") from None


def _act(args: argparse.Namespace, cache: ResponseCache, path: Path) -> int:
    if args.action == "stats":
        rows = cache.stats()
        if args.json:
            print(json.dumps({"path": str(path), "models": rows}, indent=2))
            return 0
        from descriptor.console_table import print_table

        print(f"response cache: {path}")
        print_table(rows, "entries, hits, money saved and entries rejected as damaged, by model")
    elif args.action == "clear":
        gone = cache.clear(older_than_days=args.older_than_days)
        print(f"cache: removed {gone} entries from {path}")
    else:
        lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in cache.export())
        if args.out in (None, "-"):
            sys.stdout.write(lines)
        else:
            from descriptor.io import write_text_atomic

            write_text_atomic(args.out, lines)  # a temporary file, then a rename
    return 0


def cache_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``cache``'s parser."""
    p.add_argument("action", choices=("stats", "clear", "export"))
    p.add_argument("--path", help="the cache file (default: the config's cache.path, else the user cache dir)")
    p.add_argument("--config", help="experiment TOML whose cache.path to use")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    p.add_argument("--json", action="store_true", help="stats: print JSON")
    p.add_argument("--older-than-days", type=float, metavar="DAYS", help="clear: only entries older than this (>= 0)")
    p.add_argument("--out", help="export: JSONL file (default: standard output)")
    p.set_defaults(func=cmd_cache)
