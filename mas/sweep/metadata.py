"""What a run records about itself: config (by its hash), models, seed, versions, git commit."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata as importlib_metadata
from pathlib import Path

from benchmark.base import Task
from descriptor.layout import RunKey, RunPaths
from descriptor.records import InjectionPlanRecord, PriceRecord, RunMetadata, TaskRecord
from descriptor.registry import loaded_plugins
from descriptor.run_config import config_path, store_config
from mas.config import ExperimentConfig
from mas.llm.injection import InjectionPlan
from mas.llm.prices import LOCAL_PROVIDERS
from mas.sweep.provenance import git_commit
from mas.tracing import utc_now_iso

_PACKAGES = ("langgraph", "langchain-core", "langchain-openai", "pydantic", "numpy", "scipy", "mas-econ")


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


_STORED: dict[tuple[Path, int], tuple[ExperimentConfig, str]] = {}
"""(experiment root, id of a config object) -> (that object, its stored hash): a sweep's runs share one config
object, whose dump, hash and stat were ~0.1 ms of every run. The object is kept with its hash, so its
id cannot be reused by another config while the entry lives. Configs are not changed once a sweep has them."""


def stored_config(experiment_root: Path, cfg: ExperimentConfig) -> str:
    """:func:`~descriptor.run_config.store_config` of ``cfg``'s redacted dump, once per config object and root
    in this process."""
    key = (experiment_root, id(cfg))
    hit = _STORED.get(key)
    if hit is not None and config_path(experiment_root, hit[1]).is_file():
        return hit[1]
    if len(_STORED) > 64:  # a long-lived process (tests, a notebook) sweeping many configs
        _STORED.clear()
    sha = store_config(experiment_root, cfg.redacted())
    _STORED[key] = (cfg, sha)
    return sha


def run_metadata(cfg: ExperimentConfig, key: RunKey, task: Task, *, paths: RunPaths,
                 injection: InjectionPlan | None) -> RunMetadata:
    """The ``run_<r>.metadata.json`` record of a run that starts now (no secrets: routes hold only env names);
    its config is stored once per experiment and named by its hash (:func:`descriptor.run_config.store_config`)."""
    commit, commit_unknown = git_commit()
    return RunMetadata(
        **key.identity(), experiment_id=key.experiment_id, status="running", started_at=utc_now_iso(),
        task=TaskRecord(question=task.question, reference=task.reference, metadata=task.metadata),
        thread_id=key.run_id, checkpoint_db=paths.checkpoints.name,
        config_sha256=stored_config(paths.experiment_root, cfg),
        models={name: f"{r.provider}:{r.model}" for name, r in cfg.models.items()}, prices=price_records(cfg),
        injection_plan=None if injection is None else InjectionPlanRecord(
            agent=injection.agent, step=injection.step, position=injection.position, fraction=injection.fraction,
            probe_steps=injection.probe_steps),
        versions=versions(), plugins=loaded_plugins() or None, git_commit=commit, git_commit_reason=commit_unknown,
        host=platform.node(),
    )


def price_records(cfg: ExperimentConfig) -> dict[str, PriceRecord]:
    """Route name -> the prices its calls are charged at and their source (:mod:`mas.llm.prices`)."""
    out = {}
    for name, r in cfg.models.items():
        table = r.price_table
        priced = bool(r.price_input_per_1m or r.price_output_per_1m)
        given = r.price_input_per_1m is not None or r.price_output_per_1m is not None
        source = ("table" if table.model is not None else "unknown") if table is not None else (
            "local" if r.provider in LOCAL_PROVIDERS and not priced else "config" if given else "unpriced")
        out[name] = PriceRecord(input_per_1m=r.price_input_per_1m or 0.0, output_per_1m=r.price_output_per_1m or 0.0,
                                source=source, table=None if table is None else table.table,
                                model=None if table is None else table.model,
                                date=None if table is None else utc_now_iso()[:10])
    return out
