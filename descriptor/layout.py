"""Where a run's files live and what they are called: the one place that spells it out.

An experiment root holds ``<benchmark>/<system>/<task_id>/`` task
directories; run ``r`` of a task is the files ``run_<r><suffix>`` there, and
its ``k``-th rollback the files ``run_<r>.rollback_<k><suffix>``. A run's
identity is its :class:`RunKey`.

>>> RunPaths(Path("exp/arith/sas/t1"), 0).result
PosixPath('exp/arith/sas/t1/run_0.result.json')
>>> RunPaths.parse("exp/arith/sas/t1/run_2.rollback_1.trace.jsonl").rollback
1
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from descriptor.errors import UserError

# The seed harness's per-run file names.
SUFFIXES: dict[str, str] = {
    "trace": ".trace.jsonl",
    "answer": ".answer.txt",
    "eval": ".eval.json",
    "metadata": ".metadata.json",
    "trace_metrics": ".trace_metrics.json",
    "trajectory_json": ".trajectory.json",
    "trajectory_md": ".trajectory.md",
    "checkpoints": ".checkpoints.sqlite",
    "checkpoints_packed": ".checkpoints.sqlite.gz",
    "page": ".page.json.gz",
    "result": ".result.json",
}
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
ROLLBACK_RECORD = ".json"
"""A rollback's own record: ``run_<r>.rollback_<k>.json``."""
ROLLBACK_SWEEP_NAME = "rollback_sweep.json"
"""The experiment-level record of ``run --rollback`` (how the sweep's failed runs were rolled back)."""
INDEX_NAME = "runs.jsonl"
"""The experiment-level index of finished runs (one line per result, appended as runs finish)."""
MANIFEST_NAME = "manifest.json"
SUMMARY_CACHE_NAME = ".summary_cache.json"
"""Task descriptors by their run files' fingerprint, so a summary re-reads only the tasks that changed."""
LOCK_NAME = ".sweep.lock"
ATTRIBUTION_DIR = "attribution"
"""``<root>/attribution/``: attribution outputs about the experiment's runs (score files, predictions, labels),
which the report reads; the one place inside an experiment other commands may write (:mod:`descriptor.outputs`)."""
CONFIGS_DIR = "configs"
"""``<root>/configs/<sha256>.json``: the experiment configs its runs ran with, each named by its content's SHA-256
(a run's metadata names its own by ``config_sha256``; see :mod:`descriptor.run_config`)."""


def database_files(db: Path) -> list[Path]:
    """A SQLite database file and the side files SQLite may keep beside it (WAL, shared memory, journal)."""
    return [db, *(Path(f"{db}{s}") for s in SQLITE_SIDE_FILES)]


_RUN_FILE = re.compile(r"^run_(\d+)(?:\.rollback_(\d+))?(\.[a-z_]+(?:\.[a-z]+)?)(-wal|-shm|-journal)?$")


@dataclass(kw_only=True, frozen=True, slots=True)
class RunKey:
    """The identity of one run: (experiment, benchmark, system, task, run index, seed)."""

    experiment_id: str
    benchmark: str
    system: str
    task_id: str
    run_index: int
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.experiment_id}/{self.benchmark}/{self.system}/{self.task_id}/run_{self.run_index}"

    def task_dir(self, experiment_root: Path) -> Path:
        return task_dir(experiment_root, self.benchmark, self.system, self.task_id)

    def paths(self, experiment_root: Path) -> RunPaths:
        return RunPaths(self.task_dir(experiment_root), self.run_index)

    def identity(self) -> dict[str, str | int]:
        """The :class:`descriptor.records.RunIdentity` fields of this run."""
        return {"run_id": self.run_id, "benchmark": self.benchmark, "system": self.system,
                "task_id": self.task_id, "run_index": self.run_index, "seed": self.seed}

    def mismatch(self, other: object) -> list[str]:
        """Identity fields where ``other`` (a result, metadata, manifest entry) differs from this key."""
        return [k for k, v in self.identity().items() if getattr(other, k, None) != v]


UNIT_SEP = "@"
"""Joins a system and a model route into the unit of a model-matrix sweep (``debate@gpt``): its runs live in
``<benchmark>/debate@gpt/``, and every summary, the report and ``--compare`` treat the pair as one system."""


def split_unit(name: str) -> tuple[str, str | None]:
    """``(system, model route or None)`` of a system directory name.

    >>> split_unit("debate@gpt"), split_unit("sas")
    (('debate', 'gpt'), ('sas', None))
    """
    system, sep, model = name.partition(UNIT_SEP)
    return (system, model) if sep else (name, None)


def baseline_unit(system: str, baseline: str) -> str:
    """The baseline ``system`` is compared with: the same model's baseline in a model-matrix sweep.

    >>> baseline_unit("debate@gpt", "sas"), baseline_unit("debate", "sas")
    ('sas@gpt', 'sas')
    """
    _, model = split_unit(system)
    return baseline if model is None or UNIT_SEP in baseline else f"{baseline}{UNIT_SEP}{model}"


def task_dir(experiment_root: Path, benchmark: str, system: str, task_id: str) -> Path:
    """``<root>/<benchmark>/<system>/<task_id>``."""
    return Path(experiment_root) / benchmark / system / task_id


@dataclass(frozen=True, slots=True)
class RunPaths:
    """The files of run ``run_index`` in ``task_dir`` (of its ``rollback``-th rollback when given)."""

    task_dir: Path
    run_index: int
    rollback: int | None = None

    @property
    def stem(self) -> str:
        base = f"run_{self.run_index}"
        return base if self.rollback is None else f"{base}.rollback_{self.rollback}"

    @property
    def experiment_root(self) -> Path:
        """``<root>`` of ``<root>/<benchmark>/<system>/<task_id>``."""
        return self.task_dir.parent.parent.parent

    @property
    def prefix(self) -> Path:
        """``<task_dir>/run_<r>`` (or ``.../run_<r>.rollback_<k>``): the run's files without their suffix."""
        return self.task_dir / self.stem

    def name(self, kind: str) -> str:
        """The file name of ``kind`` (a :data:`SUFFIXES` key), without building its path (cheaper in bulk)."""
        return f"{self.stem}{SUFFIXES[kind]}"

    def file(self, kind: str) -> Path:
        return self.task_dir / self.name(kind)

    trace = property(lambda self: self.file("trace"))
    answer = property(lambda self: self.file("answer"))
    eval = property(lambda self: self.file("eval"))
    metadata = property(lambda self: self.file("metadata"))
    trace_metrics = property(lambda self: self.file("trace_metrics"))
    trajectory_json = property(lambda self: self.file("trajectory_json"))
    trajectory_md = property(lambda self: self.file("trajectory_md"))
    checkpoints = property(lambda self: self.file("checkpoints"))
    page = property(lambda self: self.file("page"))
    result = property(lambda self: self.file("result"))

    @property
    def rollback_record(self) -> Path:
        """``run_<r>.rollback_<k>.json`` (only for a rollback's paths)."""
        if self.rollback is None:
            raise ValueError("rollback_record: these are the paths of a run, not of a rollback")
        return self.task_dir / f"{self.stem}{ROLLBACK_RECORD}"

    def all_files(self) -> list[Path]:
        """Every file this run may have written (for clearing an unfinished run)."""
        files = [self.file(k) for k in SUFFIXES]
        return files + database_files(self.checkpoints)[1:]

    def for_rollback(self, k: int) -> RunPaths:
        return RunPaths(self.task_dir, self.run_index, k)

    def rollbacks(self) -> list[int]:
        """Indices of this run's rollbacks that have a record, ascending."""
        found = []
        for p in self.task_dir.glob(f"run_{self.run_index}.rollback_*{ROLLBACK_RECORD}"):
            m = _RUN_FILE.match(p.name)
            if m and m.group(2) is not None and m.group(3) == ROLLBACK_RECORD:
                found.append(int(m.group(2)))
        return sorted(found)

    @classmethod
    def parse(cls, path: str | Path) -> RunPaths:
        """The run of a path ``.../run_<r>[.rollback_<k>]`` or of any of its files; ``UserError`` otherwise."""
        p = Path(path)
        m = _RUN_FILE.match(p.name) or _RUN_FILE.match(p.name + ".json")
        if m is None:
            raise UserError(f"{path}: expected a run path like <task_dir>/run_<r> (or one of its files)")
        return cls(p.parent, int(m.group(1)), None if m.group(2) is None else int(m.group(2)))


def is_rollback_record(name: str) -> bool:
    """True for a rollback's own record, ``run_<r>.rollback_<k>.json`` (not its trace or eval).

    >>> is_rollback_record("run_0.rollback_1.json"), is_rollback_record("run_0.rollback_1.eval.json")
    (True, False)
    """
    m = _RUN_FILE.match(name)
    return bool(m and m.group(2) is not None and m.group(3) == ROLLBACK_RECORD and m.group(4) is None)


def _run_file_indices(task_dir: Path) -> Iterator[int]:
    """The run index of each run file of ``task_dir`` (rollbacks excluded), in listing order, repeats included."""
    for name in os.listdir(task_dir):
        m = _RUN_FILE.match(name)
        if m and m.group(2) is None and m.group(3) in (".trace.jsonl", ".result.json", ".eval.json"):
            yield int(m.group(1))


def run_indices(task_dir: Path) -> list[int]:
    """Run indices seen in any run file of ``task_dir`` (rollbacks excluded), ascending."""
    return sorted(set(_run_file_indices(task_dir)))


def find_task_dirs(root: Path) -> list[Path]:
    """``<root>/<benchmark>/<system>/<task_id>`` directories holding at least one run file."""
    # The first run file decides: matching every name of every directory was a share of a summary's cost per run.
    return [d for d in sorted(Path(root).glob("*/*/*"))
            if d.is_dir() and not d.name.startswith(".") and next(_run_file_indices(d), None) is not None]
