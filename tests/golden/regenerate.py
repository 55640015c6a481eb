"""Rewrite tests/golden/experiment from the current code (only after a change of behaviour on purpose).

    python tests/golden/regenerate.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "experiment"
KEEP = ("*.trace.jsonl", "run_*.result.json", "descriptor.json", "experiment_summary.json", "economics.json")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "main.py", "run", "--benchmark", "arith", "--systems",
                        "sas,supervisor,debate,orchestrator", "--model", "scripted", "--task-limit", "2",
                        "--runs-per-task", "1", "--seed", "3", "--inject-errors", "0.5", "--output-root", tmp,
                        "--experiment-id", "g", "--progress", "none"], cwd=ROOT, check=True, capture_output=True)
        shutil.rmtree(GOLDEN, ignore_errors=True)
        for pattern in KEEP:
            for src in (Path(tmp) / "g").rglob(pattern):
                dst = GOLDEN / src.relative_to(Path(tmp) / "g")
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
    print(f"wrote {sum(1 for _ in GOLDEN.rglob('*') if _.is_file())} files under {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
