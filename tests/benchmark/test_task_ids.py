"""Issue 30: task ids name directories, so a data file's ids are checked when it is loaded, before anything runs.

Two tasks with one id (or ids the file-name mapping makes one: ``A/B`` and ``A_B``) ran into one directory and were
counted as one task; ``.``, ``..`` and ``""`` wrote runs into the benchmark's or system's directory; a long id
failed with "File name too long" and a NUL crashed every time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.base import MAX_TASK_ID_CHARS, check_task_ids, task_id_problem
from descriptor.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def humaneval_row(task_id: str) -> dict[str, str]:
    return {"task_id": task_id, "prompt": "def f():\n    '''One.'''\n", "entry_point": "f",
            "canonical_solution": "    return 1\n", "test": "def check(c):\n    assert c() == 1\n"}


def test_unusable_task_ids_in_a_data_file_stop_the_sweep_before_it_starts(tmp_path):
    ids = ["HumanEval/0", "HumanEval/0", "A/B", "A_B", ".", "..", "", "x" * 300, "a\x00b", "HumanEval/1"]
    data = tmp_path / "he.jsonl"
    data.write_text("".join(json.dumps(humaneval_row(i)) + "\n" for i in ids))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "run", "--model", "scripted", "--benchmark",
                           "humaneval", "--task-limit", "1", "--set", f"benchmarks.humaneval.data_path={json.dumps(str(data))}",
                           "--output-root", str(out), "--experiment-id", "e", "--progress", "none"],
                          cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr
    for line, shown in [(2, "'HumanEval_0' is also the id of"), (4, "'A_B' is also the id of"),
                        (5, "'.' starts with '.'"), (6, "'..' starts with '.'"), (7, "'' is empty"),
                        (8, "is 300 characters long"), (9, "holds a control character")]:
        assert f"{data}: line {line} " in err and shown in err, (line, shown, err[-3000:])
    assert f"{data}: line 1 (task_id 'HumanEval/0')" in err  # the first holder of a repeated id is named
    assert "line 10" not in err  # the good ids are not listed
    assert not (out / "e").exists()  # nothing was written


@pytest.mark.parametrize(("task_id", "why"), [
    ("", "is empty"), (".", "starts with '.'"), ("..", "starts with '.'"), (".hidden", "starts with '.'"),
    ("a/b", "holds '/'"), ("a\x00b", "control character"), ("a\nb", "control character"),
    ("x" * (MAX_TASK_ID_CHARS + 1), "characters long"), ("€" * 70, "bytes long"),
    ("a\ud83db", "lone surrogate"),
])
def test_a_task_id_that_cannot_name_a_directory_is_refused(task_id, why):
    assert why in (task_id_problem(task_id) or "")
    with pytest.raises(UserError, match="task 1: task id"):
        check_task_ids([(task_id, "task 1")])


def test_ordinary_task_ids_pass():
    ids = ["HumanEval_0", "mbpp_0011", "arith_0_0000", "rg_basic_arithmetic_0_0001", "x" * MAX_TASK_ID_CHARS,
           "ünïcode-ok"]
    check_task_ids((t, f"task {i}") for i, t in enumerate(ids))
