"""Compute matching for ``sas_matched``: k per benchmark so that k SAS samples spend what the named system spends.

k = round(mean tokens per run of the named system / mean tokens per run of ``sas``), both over the finished runs of
the same sweep on the same tasks, clipped to [1, 64]. The sweep runs every other system first, then ``sas_matched``
with this k. The choice is written to ``<experiment>/sas_matched.json`` with the figures it came from, and reused
on resume, so every ``sas_matched`` run of an experiment has the same k whatever was retried in between.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from descriptor.errors import UserError
from descriptor.io import write_derived_json
from descriptor.layout import UNIT_SEP, split_unit
from descriptor.records import RunResult
from mas.logging import get_logger

log = get_logger(__name__)

MATCH_FILE = "sas_matched.json"
K_MAX = 64


def check_matching(systems: Sequence[str], target: str | None) -> None:
    """A matched ``sas_matched`` needs its target and ``sas`` in the same sweep; :class:`UserError` otherwise."""
    if target is None or "sas_matched" not in systems:
        return
    missing = [s for s in (target, "sas") if s not in systems]
    if missing:
        raise UserError(f"systems.sas_matched.match = {target!r} needs {' and '.join(missing)} in --systems: k is "
                        "matched on their finished runs in the same sweep")
    if target in ("sas", "sas_matched"):
        raise UserError(f"systems.sas_matched.match = {target!r}: name a multi-agent system (e.g. debate)")


def _recorded(root: Path) -> dict[str, Any]:
    path = root / MATCH_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def matched_ks(root: Path, results: Sequence[RunResult], *, target: str, units: Sequence[tuple[str, str]],
               fallback_k: int) -> dict[tuple[str, str], int]:
    """k per (benchmark, ``sas_matched`` unit) (see the module docstring); recorded choices are kept, new ones
    recorded. In a model-matrix sweep the unit ``sas_matched@m`` is matched on ``<target>@m`` and ``sas@m``."""
    recorded = _recorded(root)
    out: dict[tuple[str, str], int] = {}
    for bench, unit in units:
        _, model = split_unit(unit)
        name = bench if model is None else f"{bench}/{model}"
        entry = recorded.get(name)
        if isinstance(entry, dict) and entry.get("target") == target and isinstance(entry.get("k"), int) \
                and 1 <= entry["k"] <= K_MAX:
            out[(bench, unit)] = entry["k"]
            continue
        along = (lambda s: s) if model is None else (lambda s: f"{s}{UNIT_SEP}{model}")
        done = [r for r in results if r.benchmark == bench and r.status != "error"]
        target_tokens = [r.tokens_total for r in done if r.system == along(target)]
        sas_tokens = [r.tokens_total for r in done if r.system == along("sas")]
        if not target_tokens or not sas_tokens or mean(sas_tokens) <= 0:
            log.warning("sas_matched: nothing to match on; using systems.sas_matched.k", benchmark=bench,
                        unit=unit, target=target, k=fallback_k)
            out[(bench, unit)] = fallback_k
            continue
        ratio = mean(target_tokens) / mean(sas_tokens)
        out[(bench, unit)] = max(1, min(K_MAX, round(ratio)))
        recorded[name] = {"target": along(target), "k": out[(bench, unit)],
                          "target_tokens_per_run": mean(target_tokens), "sas_tokens_per_run": mean(sas_tokens),
                          "ratio": ratio, "target_runs": len(target_tokens), "sas_runs": len(sas_tokens)}
    write_derived_json(root / MATCH_FILE, recorded)
    return out
