"""Which tasks of a benchmark a sweep runs: the first N (default), named ids, a seeded shuffle, strata.

- ``--task-ids a,b`` or ``--task-ids FILE`` (one id a line, ``#`` comments): exactly those tasks, in that order;
  ``--task-limit`` does not apply. An id the benchmark does not have is an error naming it; so are an empty
  value and a file that does not exist (a value written as a path: ``./x``, ``lists/ids.txt``).
- ``--shuffle``: a permutation seeded by the experiment seed and the benchmark name, so a resumed sweep (same seed)
  selects the same tasks.
- ``--stratify FIELD``: the ``--task-limit`` tasks are allocated to the values of the tasks' ``metadata[FIELD]``
  (WorkBench ``source``: its domain) in proportion to their sizes (largest remainder), each stratum taken in
  (shuffled or file) order. A field holding a list, or a value of its own for every task, groups nothing: an
  error.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from benchmark.base import Benchmark, Task
from descriptor.errors import UserError


@dataclass(kw_only=True, frozen=True, slots=True)
class TaskSelection:
    """How tasks are picked (see the module docstring); the default is the first ``--task-limit``."""

    ids: tuple[str, ...] | None = None
    shuffle: bool = False
    stratify: str | None = None

    @property
    def default(self) -> bool:
        return self.ids is None and not self.shuffle and self.stratify is None

    def record(self) -> dict[str, object]:
        """What the manifest records of it."""
        return {"task_ids": list(self.ids) if self.ids is not None else None, "shuffle": self.shuffle,
                "stratify": self.stratify}


LIST_SUFFIXES = frozenset({".txt", ".lst", ".list", ".ids", ".csv", ".tsv", ".json", ".jsonl"})
"""Endings of a value of ``--task-ids`` that names a file of ids, not an id (no benchmark's id ends so)."""


def _names_a_file(value: str) -> bool:
    """Whether ``value`` (one item, no comma) is written as a path: it starts like one (``./``, ``../``, ``/``,
    ``~``) or ends like a list file. Ids may hold a ``/`` (``HumanEval/0``), so that alone says nothing."""
    return "," not in value and (value.startswith(("./", "../", "/", "~")) or Path(value).suffix in LIST_SUFFIXES)


def parse_task_ids(value: str) -> tuple[str, ...]:
    """``a,b,c``, or the path of a file with one id a line (blank lines and ``#`` comments skipped)."""
    path = Path(value).expanduser()
    if value.strip() and path.is_dir():
        raise UserError(f"--task-ids {value}: is a directory; expected id,id,... or a file of ids")
    if not path.is_file() and _names_a_file(value.strip()):
        raise UserError(f"--task-ids {value}: no such file (expected id,id,... or a file of ids, one a line)")
    if path.is_file():
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise UserError(f"--task-ids {value}: cannot read the file ({err})") from None
        ids = [ln.split("#", 1)[0].strip() for ln in lines]
    else:
        ids = [v.strip() for v in value.split(",")]
    ids = [i for i in ids if i]
    if not ids:
        raise UserError(f"--task-ids {value!r}: no task id given (expected id,id,... or a file of ids)")
    return tuple(dict.fromkeys(ids))


def _stratum(task: Task, field: str, benchmark: str) -> str:
    if field not in task.metadata:
        keys = ", ".join(sorted(task.metadata)) or "(none)"
        raise UserError(f"--stratify {field}: {benchmark} task {task.task_id} has no metadata field {field!r}; "
                        f"its fields: {keys}")
    value = task.metadata[field]
    if isinstance(value, list | tuple | dict | set):
        raise UserError(f"--stratify {field}: {benchmark} task {task.task_id} holds a {type(value).__name__} there; "
                        "expected a field with one value per task (text or a number) to group the tasks by")
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _allocate(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """``limit`` split over strata in proportion to ``sizes`` (largest remainder; ties by stratum name)."""
    total = sum(sizes.values())
    limit = min(limit, total)
    exact = {k: limit * n / total for k, n in sizes.items()}
    out = {k: int(x) for k, x in exact.items()}
    for k in sorted(sizes, key=lambda k: (-(exact[k] - out[k]), k))[:limit - sum(out.values())]:
        out[k] += 1
    return out


def select_tasks(bench: Benchmark, name: str, limit: int, *, seed: int, selection: TaskSelection) -> list[Task]:
    """The tasks of benchmark ``name`` a sweep runs."""
    if selection.default:
        return bench.load_tasks(limit, seed=seed)
    tasks = bench.load_tasks(None, seed=seed)
    if selection.ids is not None:
        by_id = {t.task_id: t for t in tasks}
        missing = [i for i in selection.ids if i not in by_id]
        if missing:
            raise UserError(f"--task-ids: {name} has no task {', '.join(repr(m) for m in missing[:10])}"
                            f"{' …' if len(missing) > 10 else ''} ({len(tasks)} tasks; e.g. {tasks[0].task_id!r})")
        return [by_id[i] for i in selection.ids]
    if selection.shuffle:
        random.Random(f"{seed}|{name}").shuffle(tasks)
    if selection.stratify is None:
        return tasks[:limit]
    strata: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        strata[_stratum(t, selection.stratify, name)].append(t)
    if len(strata) == len(tasks) > 1:
        raise UserError(f"--stratify {selection.stratify}: each of {name}'s {len(tasks)} tasks has a value of its own "
                        "there, so every stratum is one task; expected a field that groups tasks (e.g. workbench: "
                        "source)")
    share = _allocate({k: len(v) for k, v in strata.items()}, limit)
    chosen = {t.task_id for k, v in strata.items() for t in v[:share[k]]}
    return [t for t in tasks if t.task_id in chosen]
