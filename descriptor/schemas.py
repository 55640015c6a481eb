"""The record schemas as JSON Schema files: what each run file holds, for tools that read them without Python.

``python -m descriptor.schemas`` writes one ``<record>.schema.json`` per record into ``docs/schemas/`` (or
``--out DIR``); ``--check`` exits 1 when the files there differ from the code's models (a test runs it, so the
committed files follow the models).

>>> sorted(RECORDS)[:3]
['eval', 'rollback', 'rollback_sweep']
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from descriptor.events import TraceEvent
from descriptor.io import write_text_atomic
from descriptor.records import (
    EvalRecord,
    RollbackRecord,
    RollbackSweepRecord,
    RunMetadata,
    RunResult,
    TraceMetricsRecord,
)

RECORDS: dict[str, Any] = {
    "run_result": RunResult,
    "run_metadata": RunMetadata,
    "eval": EvalRecord,
    "trace_metrics": TraceMetricsRecord,
    "trace_event": TraceEvent,
    "rollback": RollbackRecord,
    "rollback_sweep": RollbackSweepRecord,
}
"""Record name -> its model (``trace_event``: one line of ``run_<r>.trace.jsonl``, a union on ``event_type``)."""
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "docs" / "schemas"


def schema_texts() -> dict[str, str]:
    """File name -> the JSON Schema text of each record (validation mode: what a reader accepts)."""
    out = {}
    for name, model in RECORDS.items():
        schema = TypeAdapter(model).json_schema(by_alias=True)
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": name, **schema}
        out[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def stale(out_dir: Path) -> list[str]:
    """The schema files in ``out_dir`` that are missing or differ from the models."""
    return [name for name, text in schema_texts().items()
            if not (out_dir / name).is_file() or (out_dir / name).read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m descriptor.schemas", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_DIR, help=f"directory (default: {DEFAULT_DIR})")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is missing or stale")
    args = p.parse_args(argv)
    if args.check:
        bad = stale(args.out)
        if bad:
            print(f"stale JSON Schema files in {args.out}: {', '.join(bad)} (run python -m descriptor.schemas)",
                  file=sys.stderr)
        return 1 if bad else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in schema_texts().items():
        write_text_atomic(args.out / name, text)
    print(f"wrote {len(RECORDS)} schemas to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
