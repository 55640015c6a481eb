"""Runs and sweeps: one run's artifacts, resumable experiments, the manifest, executors."""

from descriptor.exports import lazy_exports
from mas.sweep.defaults import DEFAULT_RETRY_ERRORS

_EXPORTS = {
    "ExperimentRequest": "mas.sweep.experiment",
    "RunSpec": "mas.sweep.runner",
    "SweepInterrupted": "mas.sweep.loop",
    "execute_run": "mas.sweep.runner",
    "finished_result": "mas.sweep.runner",
    "injection_plan": "mas.sweep.injection",
    "plan_runs": "mas.sweep.experiment",
    "resume_run": "mas.sweep.runner",
    "run_experiment": "mas.sweep.experiment",
    "run_sweep": "mas.sweep.loop",
    "validate_request": "mas.sweep.experiment",
}
__all__ = sorted([*_EXPORTS, "DEFAULT_RETRY_ERRORS"])
__getattr__ = lazy_exports(__name__, _EXPORTS)
