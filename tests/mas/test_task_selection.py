"""Task selection (issue 28): named ids, a seeded shuffle stable under resume, proportional strata."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmark.registry import get_benchmark
from descriptor.errors import UserError
from mas.sweep.selection import TaskSelection, parse_task_ids, select_tasks


def ids(tasks):
    return [t.task_id for t in tasks]


def test_named_ids_are_run_in_the_given_order_from_a_list_or_a_file(tmp_path):
    bench = get_benchmark("arith")
    every = ids(bench.load_tasks(None))
    wanted = (every[7], every[2])
    assert ids(select_tasks(bench, "arith", 3, seed=0, selection=TaskSelection(ids=wanted))) == list(wanted)
    f = tmp_path / "ids.txt"
    f.write_text(f"# chosen by hand\n{every[7]}\n\n{every[2]}  # second\n")
    assert parse_task_ids(str(f)) == wanted
    assert parse_task_ids(f"{every[7]}, {every[2]},") == wanted


def test_an_unknown_task_id_is_an_error_naming_it():
    with pytest.raises(UserError, match=r"--task-ids: arith has no task 'nope'"):
        select_tasks(get_benchmark("arith"), "arith", 3, seed=0, selection=TaskSelection(ids=("nope",)))


def test_a_shuffle_depends_on_the_seed_only_so_a_resume_picks_the_same_tasks():
    bench = get_benchmark("arith")
    pick = lambda seed: ids(select_tasks(bench, "arith", 5, seed=seed, selection=TaskSelection(shuffle=True)))  # noqa: E731
    assert pick(1) == pick(1)
    assert pick(1) != pick(2) and pick(1) != ids(bench.load_tasks(5, seed=1))


def test_strata_get_tasks_in_proportion_to_their_sizes():
    bench = get_benchmark("workbench")
    every = bench.load_tasks(None)
    sizes = Counter(t.metadata["source"] for t in every)
    chosen = select_tasks(bench, "workbench", 30, seed=0, selection=TaskSelection(stratify="source", shuffle=True))
    got = Counter(t.metadata["source"] for t in chosen)
    assert len(chosen) == 30
    for source, n in sizes.items():
        assert abs(got[source] - 30 * n / len(every)) < 1, (source, got)


def test_stratifying_by_a_field_the_tasks_lack_names_the_fields_they_have():
    with pytest.raises(UserError, match=r"--stratify domain: arith task .* has no metadata field 'domain'; its fields: ops, start"):
        select_tasks(get_benchmark("arith"), "arith", 3, seed=0, selection=TaskSelection(stratify="domain"))


def test_plan_sizes_an_experiment_with_the_reports_paired_test():
    import subprocess
    import sys
    from pathlib import Path

    from descriptor.power import detectable_effect, difference_sd, tasks_needed

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "main.py"), "plan", "--baseline-rate", "0.5", "--effect", "0.1",
                          "--runs-per-task", "3"], capture_output=True, text=True, check=True).stdout
    n = tasks_needed(0.5, 0.1, runs_per_task=3)
    assert out.startswith(f"{n} tasks")
    # the two directions agree: n tasks detect the planned effect at the planned spread
    sd = difference_sd(0.5, 0.1, runs_per_task=3)
    assert detectable_effect(sd, n) <= 0.1 < detectable_effect(sd, n - 1)
    # more runs per task help, and a task-level share of the variance limits how much
    assert tasks_needed(0.5, 0.1, runs_per_task=10) < n < tasks_needed(0.5, 0.1, runs_per_task=1)
    assert tasks_needed(0.5, 0.1, runs_per_task=100, icc=1.0) == tasks_needed(0.5, 0.1, runs_per_task=1, icc=1.0)
    bad = subprocess.run([sys.executable, str(root / "main.py"), "plan", "--baseline-rate", "1.5", "--effect", "0.1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--baseline-rate" in bad.stderr
