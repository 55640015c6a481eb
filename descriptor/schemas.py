"""The record schemas as JSON Schema files: what each run file holds, for tools that read them without Python.

``python -m descriptor.schemas`` writes one ``<record>.schema.json`` per record into ``docs/schemas/`` (or
``--out DIR``); ``--check`` exits 1 when the files there differ from the code's models (a test runs it, so the
committed files follow the models).

>>> sorted(RECORDS)[:3]
['eval', 'rollback', 'rollback_sweep']
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, TypeAdapter

from descriptor.events import TraceEvent
from descriptor.io import write_text_atomic
from descriptor.outputs import OutputKind, check_output
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


DOCUMENTED = ("descriptor.run_metrics", "descriptor.events", "descriptor.records")
"""Modules whose models' fields are described in the schemas by the docstrings under them (dependencies first)."""


def _field_docstrings(module: ModuleType) -> dict[str, dict[str, str]]:
    """Class name -> field -> the docstring written under it (cleaned as :func:`inspect.cleandoc` does)."""
    out: dict[str, dict[str, str]] = {}
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.ClassDef):
            docs = out.setdefault(node.name, {})
            for a, b in zip(node.body, node.body[1:]):
                if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                        and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
                    docs[a.target.id] = inspect.cleandoc(b.value.value)
    return out


def describe_fields() -> None:
    """Set the record models' field descriptions from their docstrings, as pydantic's
    ``use_attribute_docstrings`` would, and rebuild the models.

    Not done at import: reading the modules' source for it was ~0.1 s of every command's start-up,
    and only these schema files show the descriptions. A field keeps the docstring of the class that declares
    it last (a subclass that declares it again without one has none), as pydantic decides."""
    docs = {name: _field_docstrings(sys.modules[name]) for name in DOCUMENTED}
    for name in DOCUMENTED:
        models = [m for m in vars(sys.modules[name]).values() if isinstance(m, type) and issubclass(m, BaseModel)
                  and m.__module__ == name]
        for model in sorted(models, key=lambda m: inspect.getsourcelines(m)[1]):
            for field, info in model.model_fields.items():
                owner = next(c for c in model.__mro__ if field in c.__dict__.get("__annotations__", {}))
                info.description = docs.get(owner.__module__, {}).get(owner.__name__, {}).get(field)
            model.model_rebuild(force=True)


def schema_texts() -> dict[str, str]:
    """File name -> the JSON Schema text of each record (validation mode: what a reader accepts)."""
    describe_fields()
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
    check_output(args.out, OutputKind("schema directory", files=tuple(schema_texts())))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in schema_texts().items():
        write_text_atomic(args.out / name, text)
    print(f"wrote {len(RECORDS)} schemas to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
