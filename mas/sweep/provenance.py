"""Which code runs: the git commit of the checkout the packages are in, or why it is unknown."""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

NOT_A_CHECKOUT = "not installed from a git checkout (a wheel or sdist install records no commit)"


@lru_cache(maxsize=1)
def git_commit(root: Path | None = None) -> tuple[str | None, str | None]:
    """``(commit, None)`` for the checkout holding our packages (``+dirty`` when it has changes), else
    ``(None, reason)``.

    Only a git work tree whose top is the directory holding the packages counts: an install in a
    virtualenv that happens to sit inside some other repository must not report that repository's commit.
    """
    root = (root or Path(__file__).resolve().parents[2]).resolve()
    if not (root / ".git").exists():
        return None, NOT_A_CHECKOUT
    if shutil.which("git") is None:
        return None, f"git is not installed (the packages are in the checkout {root})"
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        if Path(top).resolve() != root:
            return None, NOT_A_CHECKOUT
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except subprocess.CalledProcessError as err:
        return None, f"git failed in {root}: {(err.stderr or '').strip()[:200]}"
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"git failed in {root}: {err}"
    return (f"{sha}+dirty" if dirty else sha), None
