"""Attribution outputs the run view marks: step scores, conformal sets, method predictions.

Where they come from (rollbacks are run files, read by :mod:`collect`):

- ``<root>/attribution/`` (searched recursively) and every ``--attribution PATH``
  (a file, or a directory searched recursively) for ``*.jsonl`` files;
- each file is recognised by its first record: ``step_scores`` -> a
  ``score-steps`` score file; ``set`` and ``set_size`` -> ``predict-set``
  output; ``predicted_agent`` -> ``attribute``'s ``predictions.jsonl`` (the
  method's name is read from ``results.json`` or ``settings.json`` beside it).
  ``*.partial.jsonl`` (unfinished jobs) are skipped.

A record's ``id`` names a run by its path relative to the directory the job
read (``score-steps --runs-dir ROOT`` gives ``<benchmark>/<system>/<task>/run_<r>``,
a task directory gives ``<task>/run_<r>``). It is matched to a run of this
experiment by the longest path suffix that names exactly one run; ids that
match no run (Who&When records, other experiments) are counted, ambiguous
ones and records whose step count differs from the run's trace are listed
as notes and not shown. Step numbers are trajectory step positions: the
n-th event carrying an integer ``payload.step_index``, as the attribution
loaders count them.

Reads only JSON: the descriptor stage never imports ``attribution``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from descriptor.errors import UserError
from descriptor.untrusted import parse_json


@dataclass(kw_only=True, slots=True)
class RunAttribution:
    """What the attribution outputs say about one run (step numbers are positions)."""

    scores: list[tuple[str, list[float]]] = field(default_factory=list)
    """(scorer label, per-step likelihood in [0, 1])."""
    sets: list[tuple[str, list[int]]] = field(default_factory=list)
    """(conformal method label, flagged steps)."""
    methods: list[tuple[str, str | None, int | None, float | None, str | None]] = field(default_factory=list)
    """(method label, blamed agent, blamed step, confidence, error)."""
    n_steps: list[tuple[str, int]] = field(default_factory=list)
    """(source label, n_steps the record declares): checked against the trace by the caller."""


@dataclass(kw_only=True, slots=True)
class Source:
    """One attribution file that was read."""

    path: str
    kind: str
    """``scores``, ``sets`` or ``predictions``."""
    label: str
    n_records: int = 0
    n_matched: int = 0


@dataclass(kw_only=True, slots=True)
class AttributionIndex:
    by_run: dict[str, RunAttribution] = field(default_factory=dict)
    sources: list[Source] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _suffix_map(run_keys: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key in run_keys:
        parts = key.split("/")
        for k in range(2, len(parts) + 1):
            out.setdefault("/".join(parts[-k:]), []).append(key)
    return out


def match_run(record_id: str, suffixes: dict[str, list[str]]) -> tuple[str | None, bool]:
    """``(run key, ambiguous)`` for a record id: the longest path suffix naming exactly one run.

    >>> m = _suffix_map(["b/sas/t0/run_0", "b/debate/t0/run_0"])
    >>> match_run("runs/b/sas/t0/run_0", m), match_run("t0/run_0", m), match_run("ag/12", m)
    (('b/sas/t0/run_0', False), (None, True), (None, False))
    """
    parts = [p for p in record_id.replace("\\", "/").split("/") if p and p != "."]
    for k in range(min(4, len(parts)), 1, -1):
        keys = suffixes.get("/".join(parts[-k:]))
        if keys:
            return (keys[0], False) if len(keys) == 1 else (None, True)
    return None, False


def _jsonl_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.jsonl") if p.is_file() and not p.name.endswith(".partial.jsonl"))


def _records(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        notes.append(f"{path}: not readable ({err})")
        return out
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line)
        except ValueError:
            notes.append(f"{path}:{n}: not JSON; line skipped")
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            out.append(obj)
        else:
            notes.append(f"{path}:{n}: expected an object with a string id; line skipped")
    return out


def _kind(first: dict[str, Any]) -> str | None:
    if "step_scores" in first:
        return "scores"
    if "set" in first and "set_size" in first:
        return "sets"
    if "predicted_agent" in first:
        return "predictions"
    return None


def _method_name(path: Path) -> str:
    for name in ("results.json", "settings.json"):
        try:
            obj = parse_json((path.parent / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("method"), str):
            return obj["method"]
    return path.parent.name


def _label(kind: str, path: Path, first: dict[str, Any]) -> str:
    if kind == "scores":
        return str(first.get("scorer") or path.stem)
    if kind == "sets":
        return f"conformal {first.get('method') or path.stem}"
    return _method_name(path)


def _likelihood(v: Any) -> bool:
    """Whether ``v`` is a number in [0, 1] (not NaN, which JSON written by Python's ``json`` may hold)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _add(entry: RunAttribution, kind: str, label: str, rec: dict[str, Any]) -> str | None:
    """Add ``rec`` to ``entry``; a problem text when the record is unusable."""
    n = _int(rec.get("n_steps"))
    if kind == "scores":
        s = rec.get("step_scores")
        if not (isinstance(s, list) and all(_likelihood(x) for x in s)):
            return "step_scores is not a list of numbers in [0, 1]"
        entry.scores.append((label, [float(x) for x in s]))
        n = len(s) if n is None else n
    elif kind == "sets":
        s = rec.get("set")
        if not (isinstance(s, list) and all(_int(x) is not None for x in s)):
            return "set is not a list of step numbers"
        entry.sets.append((label, sorted(s)))
    else:
        conf = rec.get("confidence")
        entry.methods.append((label, rec.get("predicted_agent") if isinstance(rec.get("predicted_agent"), str) else None,
                              _int(rec.get("predicted_step")),
                              float(conf) if _likelihood(conf) else None,
                              str(rec["error"]) if rec.get("error") else None))
    if n is not None:
        entry.n_steps.append((label, n))
    return None


def load_attribution(paths: Sequence[Path], run_keys: Iterable[str], *, explicit: Sequence[Path] = ()) -> AttributionIndex:
    """Read the attribution files under ``paths`` (searched if present) and ``explicit`` (must exist).

    Raises :class:`UserError` for an ``explicit`` path that does not exist.
    """
    for p in explicit:
        if not p.exists():
            raise UserError(f"--attribution {p}: no such file or directory (expected a score file, predict-set "
                            "output, an attribute output directory, or a directory holding them)")
    index = AttributionIndex()
    suffixes = _suffix_map(run_keys)
    seen: set[Path] = set()
    labels: dict[str, int] = {}
    for root in [*paths, *explicit]:
        if not root.exists():
            continue
        for path in _jsonl_files(root):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            recs = _records(path, index.notes)
            kind = _kind(recs[0]) if recs else None
            if kind is None:
                if recs and root in explicit:
                    index.notes.append(f"{path}: not a score, predict-set or predictions file; ignored")
                continue
            label = _label(kind, path, recs[0])
            labels[label] = labels.get(label, 0) + 1
            if labels[label] > 1:  # two files from one scorer/method: tell them apart
                label = f"{label} ({path.name})"
            src = Source(path=str(path), kind=kind, label=label, n_records=len(recs))
            index.sources.append(src)
            for rec in recs:
                key, ambiguous = match_run(rec["id"], suffixes)
                if ambiguous:
                    index.notes.append(f"{path}: id {rec['id']!r} names more than one run of this experiment; skipped")
                if key is None:
                    continue
                problem = _add(index.by_run.setdefault(key, RunAttribution()), kind, label, rec)
                if problem:
                    index.notes.append(f"{path}: id {rec['id']!r}: {problem}; skipped")
                else:
                    src.n_matched += 1
    for p in explicit:  # given by name, it was meant to show something: a file of nothing usable is refused
        mine = [s for s in index.sources if Path(s.path) == p or p in Path(s.path).parents]
        if not mine:
            said = [n for n in index.notes if n.startswith(str(p))][:1]
            raise UserError(f"--attribution {p}: no score, predict-set or predictions records in it"
                            + (f" ({said[0]})" if said else ""))
    return index
