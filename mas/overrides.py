"""What the command line changes in a config: ``--set KEY=VALUE`` and ``--model`` (``run``, Studio, ``serve``)."""

from __future__ import annotations

import tomllib
from typing import Any

from mas.config import ConfigError, ExperimentConfig, parse_config


def apply_overrides(cfg: ExperimentConfig, **overrides: Any) -> ExperimentConfig:
    """Return a copy with CLI overrides applied; ``None`` values are ignored.

    ``model`` replaces every route (default, judge, roles) with the named one,
    so ``--model scripted`` gives a run with no real model anywhere; overrides of ``models.default.*`` then apply
    to that route, which is the run's default (they were dropped: ``--model scripted --set
    models.default.temperature=0`` ran at the route's own temperature).
    """
    data = cfg.model_dump()  # without the routes' api_key (never serialized): put back below
    model = overrides.pop("model", None)
    given = {k: v for k, v in overrides.items() if v is not None}
    for key, value in given.items():
        if key.split(".")[-1] == "api_key":  # argv is readable by every user of the machine
            raise ConfigError(f"--set {key}: a key is never given on the command line; put it in the route's "
                              "environment variable or in the config file (config/experiment.toml)")
        _set_path(data, key.split("."), value)  # any depth: models.default.temperature, mas.max_rounds, ...
    new = parse_config(data, "<command line>")
    for name, route in new.models.items():
        if name in cfg.models and route.api_key is None:
            route.api_key = cfg.models[name].api_key
    if model is not None:
        chosen = new.route(model)
        on_default = {k.removeprefix("models.default."): v for k, v in given.items() if k.startswith("models.default.")}
        if on_default and model != "default":
            route_data = chosen.model_dump()
            for key, value in on_default.items():
                _set_path(route_data, key.split("."), value)
            data = new.model_dump()
            data["models"] = {"default": route_data}
            key = chosen.api_key
            chosen = parse_config(data, "<command line>").models["default"]
            chosen.api_key = key
        new.models = {"default": chosen}
        new.roles = {}
    return new


def _set_path(node: dict[str, Any], parts: list[str], value: Any) -> None:
    """``node[p0][p1]...[pn] = value``, making the dicts on the way."""
    *parents, leaf = parts
    for part in parents:
        child = node.get(part) if isinstance(node, dict) else None
        if not isinstance(child, dict):
            node[part] = child = {}
        node = child
    node[leaf] = value


def parse_set_options(items: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as overrides; VALUE is a TOML value (``2``, ``"x"``, ``true``, ``[1, 2]``).

    A VALUE that is not valid TOML is taken as a plain string, so ``--set mas.termination_consensus_mode=lexical``
    works without quotes.
    """
    overrides: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip() or any(not part for part in key.strip().split(".")):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. mas.max_rounds=2")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except (tomllib.TOMLDecodeError, RecursionError):
            value = raw
        overrides[key.strip()] = value
    return overrides
