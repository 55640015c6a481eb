"""``export-otel``: finished runs' JSONL traces sent as spans, with their original timestamps.

Every run under an experiment root (``<benchmark>/<system>/<task_id>/run_<r>``,
rollbacks excluded) becomes one trace, built by :mod:`mas.otel.mapping` like a
live export: its trace id is the run's ``otel_trace_id`` (so a run exported
live and replayed later keeps its ids), or one derived from the run id for
runs written before span ids existed (trace versions 1 and 2), whose spans get
derived ids too. A run's identity comes from its metadata, else from its
``result.json``; a run with neither, or a trace damaged before its last
line, is skipped and named.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from descriptor.errors import UserError
from descriptor.events import Event, read_trace_checked
from descriptor.layout import RunPaths, find_task_dirs, run_indices
from descriptor.run_config import run_config
from descriptor.run_files import RunFileError, read_metadata, read_result
from mas.otel.mapping import RunInfo, SpanData, run_spans


@dataclass(kw_only=True, slots=True)
class ReplayedRun:
    run_id: str
    trace_id: str
    spans: list[SpanData]


@dataclass(kw_only=True, slots=True)
class Replay:
    runs: list[ReplayedRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """One line per skipped run: its file and why."""


def run_info(paths: RunPaths, events: list[Event]) -> RunInfo:
    """The root span's facts of a run: from its metadata, else from its result (older runs).

    A metadata whose config file is missing raises :class:`RunFileError` naming that file (the run is skipped):
    its spans would lose their providers."""
    try:
        meta = read_metadata(paths)
    except RunFileError as meta_err:
        try:
            res = read_result(paths)
        except RunFileError:
            raise RunFileError(f"{meta_err} (and no readable result.json)") from None
    else:
        meta.config = run_config(paths, meta)
        return RunInfo.from_metadata(meta)
    experiment = res.run_id.split("/", 1)[0]
    end = max((e.timestamp_end for e in events), default=None)
    return RunInfo(trace_id=hashlib.sha256(res.run_id.encode()).hexdigest()[:32], identity=res,
                   experiment_id=experiment, thread_id=res.run_id, error=res.error,
                   start=min((e.timestamp_start for e in events), default=None), end=end)


def replay_experiment(root: str | Path, *, record_inputs: bool = False) -> Replay:
    """The spans of every run under ``root`` (an experiment root or a task directory)."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"--experiment-root {root}: directory not found")
    task_dirs = [root] if run_indices(root) else find_task_dirs(root)
    out = Replay()
    for task_dir in task_dirs:
        for r in run_indices(task_dir):
            paths = RunPaths(task_dir, r)
            if not paths.trace.is_file():
                out.skipped.append(f"{paths.trace}: no trace")
                continue
            events, damage = read_trace_checked(paths.trace)
            if events is None:
                out.skipped.append(f"{paths.trace}:{damage[0].line}: {damage[0].message}")
                continue
            try:
                run = run_info(paths, events)
            except RunFileError as err:
                out.skipped.append(str(err))
                continue
            out.runs.append(ReplayedRun(run_id=run.identity.run_id, trace_id=run.trace_id,
                                        spans=run_spans(events, run, record_inputs=record_inputs)))
    if not out.runs and not out.skipped:
        raise UserError(f"--experiment-root {root}: no runs found (expected <benchmark>/<system>/<task_id>/run_<r>.*)")
    return out


def send(replay: Replay, url: str, *, timeout_s: float = 30.0) -> int:
    """Export every replayed run's spans to ``url`` (the traces URL); returns the spans sent.

    Raises :class:`UserError` naming the endpoint when it does not take them.
    """
    from mas.otel.export import export_now, exporter, readable

    exp = exporter(url, timeout_s=timeout_s)
    sent = 0
    try:
        for run in replay.runs:
            batch = [readable(s, run.trace_id) for s in run.spans]
            if not export_now(batch, exp):
                raise UserError(f"--endpoint {url}: the OTLP endpoint did not accept the spans of {run.identity.run_id} "
                                "(is a collector or backend listening there?)")
            sent += len(batch)
    finally:
        exp.shutdown()
    return sent
