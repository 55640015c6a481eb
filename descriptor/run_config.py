"""A run's experiment config, stored once per experiment and named by its content.

Every run's ``metadata.json`` used to repeat the whole effective config (~1.6 KB of its 2.5 KB, the same bytes
in every run of a sweep). A run's config now lives in ``<root>/configs/<sha256>.json``: the redacted config as
compact JSON, named by the SHA-256 of those bytes, and the metadata holds the hash
(``config_sha256``). The runs of one config share one file; the units of a model-matrix sweep, which run on
different routes, have one each. Metadata written before keeps its inline ``config``, which readers take first.

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> sha = store_config(root, {"seed": 0})
>>> config_path(root, sha).read_text()
'{"seed":0}\\n'
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from descriptor.io import json_bytes, write_bytes_atomic
from descriptor.layout import CONFIGS_DIR, RunPaths
from descriptor.records import RunMetadata
from descriptor.run_files import RunFileError, json_object, read_metadata


RESUME_NEUTRAL_KEYS = frozenset({"concurrency", "output_root", "cache", "limits.sweep_cost_usd"})
"""Settings a resumed sweep may change (:mod:`mas.sweep.manifest`), and that the summaries' provenance notes
ignore (:mod:`descriptor.provenance`): they change how runs are scheduled, stored or paid for, never what a run
does (a cache hit replays the reply the call would get; the sweep's spending limit is raised to finish it)."""


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): data}


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Dotted keys whose values differ, ignoring :data:`RESUME_NEUTRAL_KEYS`.

    >>> config_differences({"seed": 0, "mas": {"agents": 3}}, {"seed": 0, "mas": {"agents": 4}})
    ['mas.agents']
    """
    a, b = _flatten(old), _flatten(new)
    keys = sorted(set(a) | set(b))
    return [k for k in keys if not _neutral(k) and a.get(k) != b.get(k)]


def _neutral(key: str) -> bool:
    parts = key.split(".")
    return any(".".join(parts[:i]) in RESUME_NEUTRAL_KEYS for i in range(1, len(parts) + 1))


def config_path(experiment_root: Path, sha256: str) -> Path:
    """``<experiment_root>/configs/<sha256>.json``."""
    return Path(experiment_root) / CONFIGS_DIR / f"{sha256}.json"


def store_config(experiment_root: Path, config: dict[str, Any]) -> str:
    """Write ``config`` (already redacted; secrets are masked again on the way) under ``experiment_root`` unless a
    file of its hash is there, and return the hash: the SHA-256 (hex) of the file's bytes.

    Written durably before the run's first file names it: a finished run's config is always there. Costs a JSON
    serialization, a hash and a stat per run (~70 µs; the two copies of the config that the metadata no longer
    holds cost as much to write); the file is written once per config. Keys keep the config model's order, not
    sorted: sorting in Python was 100 µs a run, and a config is dumped in the same order every time.
    """
    data = json_bytes(config, indent=None)
    sha = hashlib.sha256(data).hexdigest()
    path = config_path(experiment_root, sha)
    if not path.is_file():  # content-addressed: a file of that name holds these very bytes
        write_bytes_atomic(path, data)
    return sha


def run_config(paths: RunPaths, meta: RunMetadata) -> dict[str, Any]:
    """The config run ``paths`` ran with (its metadata ``meta``): inline in older metadata, else the file its
    ``config_sha256`` names. :class:`RunFileError` naming the file when it is missing, unreadable or not the
    bytes its name says."""
    if meta.config is not None:
        return meta.config
    if meta.config_sha256 is None:
        raise RunFileError(f"{paths.metadata}: names no config (neither config nor config_sha256)")
    path = config_path(paths.experiment_root, meta.config_sha256)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RunFileError(f"{path}: config file not found (named by config_sha256 in {paths.metadata}; a run's "
                           f"config lives under its experiment root's {CONFIGS_DIR}/)") from None
    except OSError as err:
        raise RunFileError(f"{path}: config file not readable ({err})") from None
    if hashlib.sha256(data).hexdigest() != meta.config_sha256:
        raise RunFileError(f"{path}: config file changed: its SHA-256 is not the one in its name")
    return json_object(path, data)


def read_metadata_with_config(paths: RunPaths) -> RunMetadata:
    """Run ``paths``'s metadata with ``config`` filled in (:func:`run_config`); :class:`RunFileError` naming the
    file at fault."""
    meta = read_metadata(paths)
    meta.config = run_config(paths, meta)
    return meta
