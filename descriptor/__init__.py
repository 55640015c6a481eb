"""The run-record contract and everything computed from run files.

The contract: typed trace events (``events``), run records (``records``), the run directory layout
(``layout``), the one reader (``run_files``) and the one writer (``io``). Downstream of it: run metrics,
task descriptors, summaries, economics, topology analysis and plots.
"""

from descriptor.exports import lazy_exports
from descriptor.ownership import check_packages

check_packages()  # another distribution's top-level package of the same name: a clear ImportError

_EXPORTS = {
    "EvalRecord": "descriptor.records",
    "Event": "descriptor.events",
    "ExperimentSummary": "descriptor.summaries",
    "RunIdentity": "descriptor.records",
    "RunIssue": "descriptor.run_files",
    "RunKey": "descriptor.layout",
    "RunMetadata": "descriptor.records",
    "RunMetrics": "descriptor.run_metrics",
    "RunPaths": "descriptor.layout",
    "RunRecord": "descriptor.run_files",
    "RollbackRecord": "descriptor.records",
    "RollbackSweepRecord": "descriptor.records",
    "RunResult": "descriptor.records",
    "TRACE_VERSION": "descriptor.events",
    "TraceEvent": "descriptor.events",
    "TraceMetricsRecord": "descriptor.records",
    "UserError": "descriptor.errors",
    "compute_run_metrics": "descriptor.run_metrics",
    "find_task_dirs": "descriptor.layout",
    "is_system_actor": "descriptor.events",
    "load_task_runs": "descriptor.run_files",
    "parse_event": "descriptor.events",
    "read_json": "descriptor.io",
    "read_run": "descriptor.run_files",
    "read_trace": "descriptor.events",
    "read_trace_checked": "descriptor.events",
    "run_indices": "descriptor.layout",
    "summarize_experiment": "descriptor.summaries",
    "write_bytes_atomic": "descriptor.io",
    "write_csv_atomic": "descriptor.io",
    "write_json_atomic": "descriptor.io",
    "write_text_atomic": "descriptor.io",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
