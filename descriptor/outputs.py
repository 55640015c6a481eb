"""Where a command may write: the one rule for every output path (``--out`` and the like).

A command's output path is refused, before the command does any work, with one line naming it (exit 2) when it

- is one of the command's own inputs (the cache ``cache export`` reads, a score file ``calibrate`` reads), or a
  directory output that holds one;
- lies inside an experiment directory (one holding ``manifest.json`` or ``runs.jsonl``), whose files are the
  sweep's own (resumes and summaries trust them), outside its ``attribution/`` directory (where attribution
  outputs go, and the report finds them); the report, which lives in the experiment, may also be a directory of
  the experiment's own (``<root>/report``; it replaces only an earlier report);
- is an existing file of another kind than the command writes (a config, a manifest, a database): each
  command names its :class:`OutputKind`, and an existing file is overwritten only when it holds that kind (an
  earlier output of the same command) or nothing at all. An existing directory output must be empty or hold
  one of the files that kind writes.

What passes is written through a temporary file beside the target and a rename (:mod:`descriptor.io`), so the
target is the old file or the new one, never half of one.

>>> LABELS = OutputKind("labels file", keys=frozenset({"run_id", "decisive_step"}), lines=True)
>>> check_output("/nonexistent-dir-xyz/labels.jsonl", LABELS, inputs=["/nonexistent-dir-xyz/labels.jsonl"])
Traceback (most recent call last):
...
descriptor.errors.UserError: --out /nonexistent-dir-xyz/labels.jsonl: is an input of this command; write it elsewhere
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from descriptor.errors import UserError
from descriptor.layout import ATTRIBUTION_DIR, INDEX_NAME, MANIFEST_NAME, database_files

SNIFF_BYTES = 4 * 1024 * 1024
"""The most of an existing file read to tell its kind (bytes): a JSON document longer than this is no output of
ours that may be replaced."""


@dataclass(kw_only=False, frozen=True, slots=True)
class OutputKind:
    """What a command writes at its output path, so an existing file there can be told apart from others."""

    name: str
    """How messages call it: ``labels file``, ``calibration file``, ..."""
    keys: frozenset[str] = frozenset()
    """Keys every JSON object of this kind has (JSON Lines: its first line's); empty: any JSON object."""
    lines: bool = False
    """JSON Lines (else one JSON document)."""
    files: tuple[str, ...] = ()
    """A directory kind: the files it writes there (one of them present marks an earlier output)."""
    in_experiment: bool = False
    """May also be a directory right inside an experiment directory (the report), not only under its
    ``attribution/``."""

    @property
    def directory(self) -> bool:
        return bool(self.files)

    def holds(self, path: Path) -> bool:
        """Whether the existing file (or directory) ``path`` is an earlier output of this kind, or empty."""
        if self.directory:
            return path.is_dir() and (not any(path.iterdir()) or any((path / f).exists() for f in self.files))
        if not path.is_file():
            return False
        try:
            with path.open("rb") as fh:
                head = fh.read(SNIFF_BYTES + 1)
        except OSError:
            return False
        if not head.strip():
            return True  # an empty file: replacing it loses nothing
        if len(head) > SNIFF_BYTES and not self.lines:
            return False
        text = head.decode("utf-8", errors="replace")
        if self.lines:
            text = next((ln for ln in text.splitlines() if ln.strip()), "")
        try:
            data = json.loads(text)
        except ValueError:
            return False
        return isinstance(data, dict) and self.keys <= data.keys()


def experiment_of(path: Path) -> Path | None:
    """The experiment directory ``path`` is (or lies inside), or None."""
    for d in (path, *path.parents):
        if (d / MANIFEST_NAME).is_file() or (d / INDEX_NAME).is_file():
            return d
    return None


def _inputs(inputs: Iterable[str | Path | None]) -> list[Path]:
    out = []
    for given in inputs:
        if given is None or str(given) in ("", "-"):
            continue
        p = Path(given).expanduser().resolve()
        out.extend(database_files(p) if p.is_file() else [p])  # a database's WAL is as much the input as it
    return out


def check_output(path: str | Path, kind: OutputKind, *, flag: str = "--out",
                 inputs: Iterable[str | Path | None] = ()) -> Path:
    """Refuse ``path`` as the output of a command reading ``inputs`` (files or directories) unless the rule of
    this module allows it (:class:`UserError`, one line naming the path); returns it, resolved."""
    given = Path(path).expanduser()
    target = given.resolve()  # a symlink is judged by what it points at
    said = f"{flag} {given}"
    root = experiment_of(target)
    derived = root is not None and (target.is_relative_to(root / ATTRIBUTION_DIR)
                                    or (kind.in_experiment and target.parent == root))
    if root is not None and not derived:
        raise UserError(f"{said}: is inside the experiment {root}, whose files are the sweep's own; write it "
                        f"elsewhere (attribution outputs may go under {root / ATTRIBUTION_DIR})")
    for src in _inputs(inputs):
        if target == src:
            raise UserError(f"{said}: is an input of this command; write it elsewhere")
        if kind.directory and src.is_relative_to(target):
            raise UserError(f"{said}: holds {src}, an input of this command; write it elsewhere")
    if target.exists() or given.is_symlink():
        if kind.directory and not target.is_dir():
            raise UserError(f"{said}: exists and is not a directory; expected a directory for the {kind.name}")
        if not kind.directory and target.is_dir():
            raise UserError(f"{said}: is a directory; expected a file path for the {kind.name}")
        if not kind.holds(target):
            what = "holds other files" if kind.directory else "is another kind of file"
            raise UserError(f"{said}: exists and {what}, not a {kind.name}; it is not overwritten (give a new path, "
                            "or delete it first)")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{said}: {parent}: is a file; expected a directory")
            break
    return target
