"""CLI command ``export-otel``: replay finished runs' traces to an OpenTelemetry backend."""

from __future__ import annotations

import argparse
import sys


def _export_otel(args: argparse.Namespace) -> int:
    from descriptor.errors import UserError
    from descriptor.redact import redact
    from mas.otel.endpoint import export_endpoint, traces_url
    from mas.otel.replay import replay_experiment, send

    if args.endpoint:
        if not args.endpoint.startswith(("http://", "https://")):
            raise UserError(f"--endpoint {args.endpoint!r}: expected an http:// or https:// URL")
        url = args.endpoint if args.endpoint.rstrip("/").endswith("/v1/traces") else traces_url(args.endpoint)
    else:
        url = export_endpoint()
        if url is None:
            raise UserError("no OTLP endpoint: give --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT "
                            "(or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")
    replay = replay_experiment(args.experiment_root, record_inputs=args.record_inputs)
    for line in replay.skipped:
        print(redact(f"skipped {line}"), file=sys.stderr)
    sent = send(replay, url)
    print(redact(f"exported {len(replay.runs)} run(s), {sent} spans, to {url}"))  # the URL may hold a password
    return 0


def export_otel_parser(p: argparse.ArgumentParser) -> None:
    """Fill ``export-otel``'s parser."""
    p.description = ("Replays every run's JSONL trace under the experiment root as one OpenTelemetry "
                     "trace (GenAI semantic conventions) with the original timestamps; runs written "
                     "before span ids existed get derived ids. Message contents are sent only with "
                     "--record-inputs. Headers (e.g. a backend's key) come from "
                     "OTEL_EXPORTER_OTLP_HEADERS.")
    p.add_argument("--experiment-root", required=True, help="experiment directory (or one task directory)")
    p.add_argument("--endpoint", default=None,
                   help="OTLP/HTTP base URL, e.g. http://127.0.0.1:6006 (spans go to URL/v1/traces); "
                        "default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT")
    p.add_argument("--record-inputs", action="store_true",
                   help="also send message contents (input messages, answers, tool arguments and outputs)")
    p.set_defaults(func=_export_otel)
