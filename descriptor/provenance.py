"""Whether an experiment's runs all ran with one config and one version of the code: notes when they did not.

A sweep refuses to resume an experiment with another config (:mod:`mas.sweep.manifest`), but that guard reads
``manifest.json``: with the manifest gone (moved away, as the advice for a damaged one says), the experiment can
be resumed with any config, and a summary mixed its runs silently. The runs' own files say what they ran with:
their configs are stored once each under ``configs/`` (:mod:`descriptor.run_config`), and each invocation of the
sweep records its git commit in the manifest. These notes say when either is more than one, so a summary never
mixes two setups without saying so. The settings a resume may change are not a difference (the one rule,
:func:`descriptor.run_config.config_differences`); nor, in a model matrix, is the default route, which is each
unit's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from descriptor.layout import CONFIGS_DIR, MANIFEST_NAME
from descriptor.run_config import config_differences
from descriptor.untrusted import BadJson, parse_json


def _setup(config: dict[str, Any]) -> dict[str, Any]:
    """The config as the setup it describes: in a model matrix, without the unit's own default route."""
    if config.get("sweep_models") and isinstance(config.get("models"), dict):
        return {**config, "models": {k: v for k, v in config["models"].items() if k != "default"}}
    return config


def _read(path: Path) -> object:
    try:
        return parse_json(path.read_bytes())
    except (OSError, BadJson):
        return None


def provenance_notes(root: Path) -> list[str]:
    """Notes (one line each) when the runs under ``root`` ran with more than one config or more than one git
    commit; [] when they did not, or nothing says."""
    notes = []
    setups: list[tuple[dict[str, Any], list[str]]] = []  # a setup and the config files that hold it
    for path in sorted((root / CONFIGS_DIR).glob("*.json")):
        if not isinstance(config := _read(path), dict):
            continue
        setup = _setup(config)
        same = next((names for known, names in setups if not config_differences(known, setup)), None)
        if same is None:
            setups.append((setup, [path.name]))
        else:
            same.append(path.name)
    if len(setups) > 1:
        files = "; ".join(", ".join(names) for _, names in setups)
        notes.append(f"{root / CONFIGS_DIR}: the runs ran with {len(setups)} different configs ({files}); this "
                     "summary mixes their runs (compare the files; a run's metadata.json names its config_sha256)")
    manifest = _read(root / MANIFEST_NAME)
    invocations = manifest.get("invocations") if isinstance(manifest, dict) else None
    commits: dict[str, str] = {}  # commit -> when it was first used
    for inv in invocations if isinstance(invocations, list) else []:
        if isinstance(inv, dict) and isinstance(commit := inv.get("git_commit"), str):
            commits.setdefault(commit, str(inv.get("started_at", "?")))
    if len(commits) > 1:
        used = ", ".join(f"{c} (from {when})" for c, when in commits.items())
        notes.append(f"{root / MANIFEST_NAME}: the sweep's invocations ran on {len(commits)} versions of the code "
                     f"({used}); this summary mixes their runs (each run's metadata.json names its git_commit)")
    return notes


def unpriced_note(route: str, model: str, table: str) -> str:
    """The line for a route whose model the price table does not know (the sweep's console, summaries, report)."""
    return (f"models.{route}: model {model!r} is not in {table}'s price table: priced 0 USD, so its cost figures "
            f"are not measured; set models.{route}.price_input_per_1m and price_output_per_1m (USD per million "
            "tokens) to price it")


def price_notes(root: Path) -> list[str]:
    """One note per route of the runs' configs that a sweep priced 0 because the price table does not know its
    model (``models.<route>.price_table`` with no ``model``; :mod:`mas.llm.prices`)."""
    notes: dict[str, None] = {}
    for path in sorted((root / CONFIGS_DIR).glob("*.json")):
        config = _read(path)
        routes = config.get("models") if isinstance(config, dict) else None
        for name, route in routes.items() if isinstance(routes, dict) else ():
            table = route.get("price_table") if isinstance(route, dict) else None
            if isinstance(table, dict) and table.get("model") is None:
                notes[unpriced_note(str(name), str(route.get("model")), str(table.get("table")))] = None
    return list(notes)
