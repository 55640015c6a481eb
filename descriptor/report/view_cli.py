"""``view``: serve the experiments under an output root on 127.0.0.1, their reports kept up to date as runs finish
(:mod:`descriptor.report.view`)."""

from __future__ import annotations

import argparse
import sys

from descriptor.cliargs import nonnegative_int


def _run(args: argparse.Namespace) -> int:
    from descriptor.report.view import make_server

    server = make_server(args.output_root, port=args.port, interval_s=args.interval)
    host, port = server.server_address[:2]
    print(f"serving the experiments under {args.output_root} at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def view_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``view``'s parser."""
    from descriptor.report.view import DEFAULT_INTERVAL_S, DEFAULT_PORT

    p.description = (
        "Serve OUTPUT_ROOT's experiments on 127.0.0.1 (nothing is sent anywhere): a list of them, each "
        "one's report (index, grid, run viewer with every run's transcript) and its run files. While a page is "
        "open, the report is rebuilt into <experiment>/.view/report/ when runs finish, and the page reloads.")
    p.add_argument("output_root", nargs="?", default="artifacts", metavar="OUTPUT_ROOT",
                   help="directory holding experiment directories (default: artifacts)")
    p.add_argument("--port", type=nonnegative_int, default=DEFAULT_PORT,
                   help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: a free one, printed)")
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, metavar="S",
                   help=f"seconds between an open page's checks and between rebuilds (default {DEFAULT_INTERVAL_S:g})")
    p.set_defaults(func=_run)
