"""What an interrupted ``rollback-experiment`` already did: ``<out>/rollbacks.jsonl``.

Each rollback that ran to its end is appended there as it ends (one line: strategy, what chose its restart
step, record), after a first line naming the experiment. The same command run again with the same ``--out``
reuses those rollbacks and redoes only the others: on the embedded model a rollback of every failed run by three
strategies takes the better part of an hour, and a timeout or Ctrl-C near its end lost all of it. A rollback is
reused only for the same strategy and the same basis of its choice: the scoring and, for ``conformal``, the
calibration (``restart`` and ``oracle`` need neither, so adding a scored strategy later reuses them).

A line is reused only while the rollback's own record file (``run_<r>.rollback_<k>.json``) still holds the same
record, so every figure of ``rollback_results.json`` can still be recomputed from the run files. A rollback
that ended in an error (no outcome) is not kept: it is tried again. A line cut short by a crash is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from descriptor.errors import UserError
from descriptor.io import json_bytes
from descriptor.layout import RunPaths
from descriptor.outputs import OutputKind
from descriptor.records import RollbackRecord
from descriptor.run_files import RunFileError, read_record

PROGRESS_FILE = "rollbacks.jsonl"
ROLLBACK_OUT = OutputKind("rollback output directory", files=(PROGRESS_FILE, "rollback_results.json"))
"""What ``rollback-experiment --out`` is: a directory of these files (an earlier one of the same experiment is
resumed)."""


class RollbackProgress:
    """The finished rollbacks of one experiment's rollback runs to ``out``, and the file they are appended to."""

    def __init__(self, out: str | Path, experiment_root: str | Path) -> None:
        self.path = Path(out) / PROGRESS_FILE
        self.key = {"experiment_root": str(Path(experiment_root).resolve())}
        self.done: dict[tuple[str, str, str], RollbackRecord] = {}
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise UserError(f"--out {out}: expected a directory (for rollback_results.json and {PROGRESS_FILE}), "
                            "found a file")
        if self.path.is_file():
            self._read()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(json_bytes({"key": self.key}, indent=None))

    def _read(self) -> None:
        text = self.path.read_text(encoding="utf-8")
        lines = text.splitlines()
        try:
            head = json.loads(lines[0])["key"] if lines else None
        except (ValueError, TypeError, KeyError):
            head = None
        if head != self.key:
            raise UserError(f"{self.path}: holds rollbacks of another experiment than {self.key['experiment_root']} "
                            f"(its first line: {lines[0][:200] if lines else 'none'}); give another --out, or delete "
                            "the file to start over")
        for line in lines[1:]:
            try:
                entry = json.loads(line)
                rec = RollbackRecord.model_validate(entry["record"])
                key = (str(entry["strategy"]), rec.run, _basis_key(entry["basis"]))
            except (ValueError, TypeError, KeyError, ValidationError):
                continue  # a line cut short by a crash: that rollback is redone
            if _on_disk(rec):
                self.done[key] = rec
        if not text.endswith("\n"):  # a line cut short: the next one starts on a line of its own
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write("\n")

    def get(self, strategy: str, basis: dict[str, Any], run: str) -> RollbackRecord | None:
        """The finished rollback of ``run`` (its path prefix) by ``strategy`` on ``basis`` (what chose its restart
        step) from an earlier invocation, if any."""
        return self.done.get((strategy, run, _basis_key(basis)))

    def add(self, strategy: str, basis: dict[str, Any], rec: RollbackRecord) -> None:
        """Append ``rec`` when it ran to its end (an error is tried again by the next invocation)."""
        if rec.status != "finished":
            return
        with self.path.open("ab") as fh:  # redacted like the rollback's own record file
            fh.write(json_bytes({"strategy": strategy, "basis": basis, "record": rec.model_dump(mode="json")},
                                indent=None))
        self.done[(strategy, rec.run, _basis_key(basis))] = rec


def _basis_key(basis: Any) -> str:
    return json.dumps(basis, sort_keys=True)


def _on_disk(rec: RollbackRecord) -> bool:
    """True when the rollback's record file still holds ``rec``."""
    try:
        paths = RunPaths.parse(rec.run).for_rollback(rec.rollback_index)
        return read_record(paths.rollback_record, RollbackRecord) == rec
    except (UserError, RunFileError):
        return False
