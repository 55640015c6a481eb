"""Command ``cache``: what the response cache holds and saved, emptying it, exporting it as JSONL."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from descriptor.errors import UserError


def _cache_path(args: argparse.Namespace) -> Path:
    """The cache file named by ``--path``, else the config's ``cache.path``, else the default."""
    from mas.cli import load_effective_config
    from mas.llm.cache import default_path

    if args.path:
        return Path(args.path).expanduser()
    cfg = load_effective_config(args)
    return Path(cfg.cache.path).expanduser() if cfg.cache.path else default_path()


def cmd_cache(args: argparse.Namespace) -> int:
    from mas.llm.cache import open_cache

    path = _cache_path(args)
    if not path.is_file():  # clear too: emptying what is not there must not create it
        raise UserError(f"cache: no response cache at {path} (runs write one with --cache write or readwrite)")
    cache = open_cache(path)
    if args.action == "stats":
        rows = cache.stats()
        if args.json:
            print(json.dumps({"path": str(path), "models": rows}, indent=2))
            return 0
        from mas.cli import print_table

        print(f"response cache: {path}")
        print_table(rows, "entries, hits and money saved by model")
    elif args.action == "clear":
        gone = cache.clear(older_than_days=args.older_than_days)
        print(f"cache: removed {gone} entries from {path}")
    else:
        out = sys.stdout if args.out in (None, "-") else open(args.out, "w", encoding="utf-8")  # noqa: SIM115
        try:
            for entry in cache.export():
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
        finally:
            if out is not sys.stdout:
                out.close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the response cache: stats, clear, export")
    p.add_argument("action", choices=("stats", "clear", "export"))
    p.add_argument("--path", help="the cache file (default: the config's cache.path, else the user cache dir)")
    p.add_argument("--config", help="experiment TOML whose cache.path to use")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    p.add_argument("--json", action="store_true", help="stats: print JSON")
    p.add_argument("--older-than-days", type=float, metavar="DAYS", help="clear: only entries older than this")
    p.add_argument("--out", help="export: JSONL file (default: standard output)")
    p.set_defaults(func=cmd_cache)
