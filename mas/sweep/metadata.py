"""What a run records about itself: config (by its hash), models, seed, versions, git commit."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata as importlib_metadata

from benchmark.base import Task
from descriptor.layout import RunKey, RunPaths
from descriptor.records import InjectionPlanRecord, RunMetadata, TaskRecord
from descriptor.run_config import store_config
from mas.config import ExperimentConfig
from mas.llm.injection import InjectionPlan
from mas.sweep.provenance import git_commit
from mas.tracing import utc_now_iso

_PACKAGES = ("langgraph", "langchain-core", "langchain-openai", "pydantic", "mas-econ")


@lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """Python and key package versions."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = importlib_metadata.version(pkg)
        except importlib_metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def run_metadata(cfg: ExperimentConfig, key: RunKey, task: Task, *, paths: RunPaths,
                 injection: InjectionPlan | None) -> RunMetadata:
    """The ``run_<r>.metadata.json`` record of a run that starts now (no secrets: routes hold only env names);
    its config is stored once per experiment and named by its hash (:func:`descriptor.run_config.store_config`)."""
    commit, commit_unknown = git_commit()
    return RunMetadata(
        **key.identity(), experiment_id=key.experiment_id, status="running", started_at=utc_now_iso(),
        task=TaskRecord(question=task.question, reference=task.reference, metadata=task.metadata),
        thread_id=key.run_id, checkpoint_db=paths.checkpoints.name,
        config_sha256=store_config(paths.experiment_root, cfg.redacted()),
        models={name: f"{r.provider}:{r.model}" for name, r in cfg.models.items()},
        injection_plan=None if injection is None else InjectionPlanRecord(
            agent=injection.agent, step=injection.step, position=injection.position, fraction=injection.fraction,
            probe_steps=injection.probe_steps),
        versions=versions(), git_commit=commit, git_commit_reason=commit_unknown, host=platform.node(),
    )
