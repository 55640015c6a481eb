"""An experiment's run files as pandas DataFrames, for notebooks: one row per run, one row per trace event.

Read from the files a sweep wrote (the log is the source of truth), never from a sweep's memory, so a notebook
can open any experiment directory, finished, resumed or copied from another machine.

>>> runs = load_runs("artifacts/g")                          # doctest: +SKIP
>>> runs.groupby("system")[["success", "tokens_total"]].mean()  # doctest: +SKIP
>>> events = load_events("artifacts/g")                      # doctest: +SKIP
>>> events[events.event_type == "tool_call"].groupby("actor").size()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from descriptor.errors import UserError
from descriptor.extras import require_extra
from descriptor.events import read_trace
from descriptor.layout import RunPaths, find_task_dirs, run_indices

if TYPE_CHECKING:
    import pandas as pd

def _runs(root: Path) -> Iterator[RunPaths]:
    if not Path(root).is_dir():
        raise UserError(f"{root}: no such experiment directory (expected <root>/<benchmark>/<system>/<task_id>/)")
    for task_dir in find_task_dirs(Path(root)):
        for r in run_indices(task_dir):
            yield RunPaths(task_dir, r)


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def run_rows(root: str | Path) -> list[dict[str, Any]]:
    """One dict per finished run (``run_<r>.result.json`` present), in directory order: the result's fields,
    the default route's model (``model``, from the metadata) and the scalar run metrics."""
    rows = []
    for paths in _runs(Path(root)):
        if not paths.result.is_file():
            continue  # unfinished: its result is written last
        row = _json(paths.result)
        meta, metrics = _json(paths.metadata), _json(paths.trace_metrics)
        row["model"] = (meta.get("models") or {}).get("default")
        row["experiment_id"] = meta.get("experiment_id", Path(root).name)
        for key, value in metrics.items():
            if key not in row and isinstance(value, int | float | str | bool | type(None)):
                row[key] = value
        rows.append(row)
    return rows


def event_rows(root: str | Path) -> list[dict[str, Any]]:
    """One dict per trace event of every run (finished or not), in trace order: the run's identity, the event's
    envelope, its payload ``kind`` and ``step_index``, and its whole payload as JSON text (``payload``)."""
    rows = []
    for paths in _runs(Path(root)):
        if not paths.trace.is_file():
            continue
        benchmark, system, task_id = paths.task_dir.parts[-3:]
        for event in read_trace(paths.trace, strict=False):
            data = event.model_dump(mode="json", by_alias=True, exclude={"payload"})
            data.update(benchmark=benchmark, system=system, task_id=task_id, run_index=paths.run_index,
                        kind=getattr(event.payload, "kind", None), step_index=event.step_index,
                        payload=event.payload.model_dump_json(by_alias=True, exclude_none=True))
            rows.append(data)
    return rows


def load_runs(root: str | Path) -> pd.DataFrame:
    """The experiment's finished runs as a DataFrame, one row per run (see :func:`run_rows`)."""
    import pandas as pd

    return pd.DataFrame(run_rows(root))


def load_events(root: str | Path) -> pd.DataFrame:
    """Every trace event of the experiment's runs as a DataFrame, one row per event (see :func:`event_rows`)."""
    import pandas as pd

    frame = pd.DataFrame(event_rows(root))
    if "step_index" in frame:
        frame["step_index"] = frame["step_index"].astype("Int64")  # null for events that are no trajectory step
    return frame


def to_parquet(root: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write ``runs.parquet`` and ``events.parquet`` (the two frames) to ``out_dir`` (default: ``root``); each
    written to a temporary file and renamed, so a file there is whole. Needs pyarrow (an optional package)."""
    require_extra("parquet", "to_parquet (load_runs/load_events work without it)")
    out = Path(root if out_dir is None else out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in (("runs", load_runs(root)), ("events", load_events(root))):
        target = out / f"{name}.parquet"
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.", suffix=".tmp")
        os.close(fd)
        try:
            frame.to_parquet(tmp, index=False)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        written.append(target)
    return written
