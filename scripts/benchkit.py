"""What the benchmark scripts that drive the CLI share: a command that must succeed, and a working directory
that ``--keep`` keeps and that is otherwise a temporary one, removed at the end."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from main import main as _main  # noqa: E402


def cli(*args: str) -> None:
    """``main.py ARGS`` in this process; SystemExit naming the command when it does not exit 0."""
    if _main(list(args)) != 0:
        raise SystemExit(f"command failed: main.py {' '.join(args)}")


@contextlib.contextmanager
def work_dir(keep: str | Path | None, prefix: str) -> Iterator[Path]:
    """``keep`` (made if missing, left in place), else a new temporary directory removed on the way out."""
    if keep:
        root = Path(keep)
        root.mkdir(parents=True, exist_ok=True)
        yield root
        return
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
