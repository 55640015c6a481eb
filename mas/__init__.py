"""The runtime: a single-agent system and multi-agent topologies as LangGraph graphs, traced runs and sweeps.

Subpackages by job: ``llm`` (routes and the one model-call layer), ``topologies`` (the graphs, the
termination controller, judges, prompts), ``tools``, ``sweep`` (runs, experiments, manifest, executors),
``serving`` (the embedded llama.cpp model), ``scripted`` (the deterministic test double).
"""

from descriptor.exports import lazy_exports
from descriptor.ownership import check_packages

check_packages()  # another distribution's top-level package of the same name: a clear ImportError

_EXPORTS = {
    "ExperimentConfig": "mas.config",
    "ExperimentRequest": "mas.sweep.experiment",
    "ModelRoute": "mas.config",
    "RunSpec": "mas.sweep.runner",
    "SYSTEMS": "mas.systems",
    "Tracer": "mas.tracing",
    "apply_overrides": "mas.overrides",
    "current_tracer": "mas.tracing",
    "execute_run": "mas.sweep.runner",
    "final_answer": "mas.systems",
    "load_config": "mas.config",
    "resume_run": "mas.sweep.runner",
    "run_experiment": "mas.sweep.experiment",
    "use_tracer": "mas.tracing",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
