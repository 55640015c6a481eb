"""What a run records about itself: config, models, seed, versions, git commit."""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from descriptor.redact import redact
from mas.config import ExperimentConfig
from mas.tracing import utc_now_iso

if TYPE_CHECKING:
    from mas.llm.models import ModelSet
    from mas.sweep.runner import RunSpec

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


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The project checkout's commit (with ``+dirty`` when it has changes), or None outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return f"{sha}+dirty" if dirty else sha
    except (OSError, subprocess.SubprocessError):
        return None


def run_metadata(cfg: ExperimentConfig, spec: RunSpec, *, models: ModelSet, status: str) -> dict[str, Any]:
    """The ``run_<r>.metadata.json`` body (no secrets: routes hold only env var names)."""
    return redact({
        "version": 1,
        "run_id": spec.run_id,
        "experiment_id": spec.experiment_id,
        "benchmark": spec.benchmark,
        "system": spec.system,
        "task_id": spec.task.task_id,
        "run_index": spec.run_index,
        "seed": spec.seed,
        "status": status,
        "started_at": utc_now_iso(),
        "task": {"question": spec.task.question, "reference": spec.task.reference, "metadata": spec.task.metadata},
        "thread_id": spec.run_id,
        "checkpoint_db": spec.path(".checkpoints.sqlite").name,
        "config": cfg.redacted(),
        "models": {name: f"{r.provider}:{r.model}" for name, r in cfg.models.items()},
        "injection_plan": None if models.injection is None else {
            "agent": models.injection.agent, "step": models.injection.step},
        "injected_error": None,
        "versions": versions(),
        "git_commit": git_commit(),
        "host": platform.node(),
    })
