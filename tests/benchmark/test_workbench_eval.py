"""WorkBench tasks and evaluation: data, answer parsing coverage, outcome-centric verdicts, side effects."""

from __future__ import annotations

import ast
import csv
import doctest
import importlib
import re
from pathlib import Path

import pytest

from benchmark.registry import get_benchmark
from benchmark.workbench import TOOLS, WorkbenchEnvironment, WorkbenchState
from benchmark.workbench.answers import format_action, parse_action
from benchmark.workbench.data import query_rows
from benchmark.workbench.state import diff_rows
from descriptor.errors import UserError

DATA = Path(__file__).resolve().parents[2] / "benchmark" / "workbench" / "data"


@pytest.fixture(scope="module")
def bench():
    return get_benchmark("workbench")


@pytest.fixture(scope="module")
def tasks(bench):
    return bench.load_tasks()


def by_id(tasks, task_id):
    return next(t for t in tasks if t.task_id == task_id)


def run(bench, task, actions) -> WorkbenchEnvironment:
    env = bench.make_environment(task)
    for name, args in actions:
        env.call(name, args)
    return env


# ---------------------------------------------------------------- data

def test_690_tasks_with_stable_ids_and_metadata(tasks) -> None:
    assert len(tasks) == 690 == len({t.task_id for t in tasks})
    assert all(re.fullmatch(r"workbench_[a-z_]+_\d{3}", t.task_id) for t in tasks)
    sources = {t.metadata["source"] for t in tasks}
    assert sources == {"analytics", "calendar", "customer_relationship_manager", "email", "multi_domain",
                       "project_management"}
    t = by_id(tasks, "workbench_calendar_000")
    assert t.metadata["query"] == "Delete my first meeting on December 13"
    assert t.metadata["domains"] == ["calendar"] and t.metadata["action_class"] == "single"
    assert t.metadata["template"] == 0 and t.metadata["base_template"].startswith("Cancel my first meeting")
    assert "2023-11-30" in t.question and t.metadata["query"] in t.question
    assert all(t.metadata["multi_domain"] == (t.metadata["source"] == "multi_domain") for t in tasks)


def test_no_action_count_read_from_the_raw_files() -> None:
    empty = total = 0
    for path in sorted((DATA / "queries_and_answers").glob("*.csv")):
        for row in csv.DictReader(path.open(encoding="utf-8")):
            total += 1
            empty += ast.literal_eval(row["answer"]) == []
    assert (total, empty) == (690, 122)


def test_task_order_is_a_fixed_mix(bench, tasks) -> None:
    first = bench.load_tasks(12)
    assert [t.task_id for t in first] == [t.task_id for t in tasks[:12]]
    assert len({t.metadata["source"] for t in first}) >= 3


def test_every_expected_answer_parses_into_a_known_tool_and_arguments() -> None:
    used = set()
    for row in query_rows():
        for text in row.answer:
            action = parse_action(text)
            spec = TOOLS[action.name]  # KeyError: a function the answers use and we lack
            assert set(action.args) <= set(spec.args_model.model_fields), text
            assert parse_action(format_action(action)) == action
            used.add(action.name)
    assert len(used) == 13 and all(TOOLS[n].side_effects for n in used)


@pytest.mark.parametrize("text", ['__import__("os").system("true")', 'calendar.delete_event.func("1")',
                                  'calendar.delete_event.func(event_id=open("x"))', "calendar.delete_event(x='1')"])
def test_answer_parser_refuses_anything_but_plain_calls(text: str) -> None:
    with pytest.raises(ValueError):
        parse_action(text)


# ---------------------------------------------------------------- evaluation

def test_every_oracle_passes_and_empty_passes_only_where_nothing_changes(bench, tasks) -> None:
    noop_expected = []
    for task in tasks:
        actions = bench.reference_actions(task)
        env = run(bench, task, [(a.name, a.args) for a in actions])
        assert all(a.ok for a in env.actions), task.task_id  # every expected call succeeds
        oracle = bench.evaluate(task, bench.reference_answer(task), env)
        assert oracle.success and oracle.details["exact_action_match"], task.task_id
        assert not oracle.details["side_effects"] and oracle.details["wrong_changes"] == 0
        changes_state = bool(diff_rows(env.state, WorkbenchState.pristine()))
        empty = bench.evaluate(task, "", bench.make_environment(task))
        assert empty.success == (not changes_state), task.task_id
        assert empty.details["side_effects"] is False  # doing nothing never has side effects
        if actions and not changes_state:
            noop_expected.append(task.task_id)
    # Two CRM rows expect an update that sets the value the record already has.
    assert sorted(noop_expected) == ["workbench_customer_relationship_manager_031",
                                     "workbench_customer_relationship_manager_032"]


def test_wrong_argument_fails_with_a_side_effect(bench, tasks) -> None:
    task = by_id(tasks, "workbench_calendar_000")  # expected: delete event 00000256
    ev = bench.evaluate(task, "", run(bench, task, [("calendar.delete_event", {"event_id": "00000257"})]))
    assert not ev.success and ev.score == 0.0
    assert ev.details["side_effects"] is True and ev.details["exact_action_match"] is False
    assert ev.details["wrong_changes"] == 2 and ev.details["wrong_changes_by_table"] == {"calendar": 2}
    assert ev.details["actions"] == [{"name": "calendar.delete_event", "args": {"event_id": "00000257"}, "ok": True}]


def test_failed_and_read_only_calls_leave_the_outcome_alone(bench, tasks) -> None:
    task = by_id(tasks, "workbench_calendar_000")
    env = run(bench, task, [("calendar__search_events", {"time_min": "2023-12-13 00:00:00"}),
                            ("calendar.delete_event", {"event_id": "99999999"}),  # fails: no such event
                            ("calendar__delete_event", {"event_id": "00000256"})])
    ev = bench.evaluate(task, "whatever", env)
    assert ev.success and not ev.details["side_effects"]
    assert ev.details["exact_action_match"] is False  # the failed delete was still a call (as in WorkBench)
    assert (ev.details["tool_calls"], ev.details["failed_tool_calls"]) == (3, 1)


def test_text_compares_case_insensitively_except_status_list_board(bench, tasks) -> None:
    task = next(t for t in tasks if t.metadata["source"] == "email" and t.metadata["template"] == 2)
    (action,) = bench.reference_actions(task)
    shouted = {k: v.upper() for k, v in action.args.items()}
    assert bench.evaluate(task, "", run(bench, task, [(action.name, shouted)])).success
    crm = by_id(tasks, "workbench_customer_relationship_manager_000")  # status update to "Qualified"
    (update,) = bench.reference_actions(crm)
    assert update.args["field"] == "status"
    env = run(bench, crm, [])
    env.state.tables["customer_relationship_manager"].find(update.args["customer_id"])["status"] = "qualified"
    assert not bench.evaluate(crm, "", env).success


def test_forks_are_judged_on_their_own_state(bench, tasks) -> None:
    task = by_id(tasks, "workbench_calendar_000")
    env = bench.make_environment(task)
    right, wrong = env.fork(), env.fork()
    right.call("calendar.delete_event", {"event_id": "00000256"})
    wrong.call("calendar.delete_event", {"event_id": "00000013"})
    assert bench.evaluate(task, "", right).success
    assert not bench.evaluate(task, "", wrong).success
    assert not bench.evaluate(task, "", env).success and env.actions == []


def test_evaluate_needs_the_runs_environment(bench, tasks) -> None:
    task = tasks[0]
    with pytest.raises(UserError, match="judges the run's environment"):
        bench.evaluate(task, "done")
    with pytest.raises(ValueError, match="evaluated for"):
        bench.evaluate(task, "", bench.make_environment(tasks[1]))


def test_tool_option(tasks) -> None:
    crm_task = next(t for t in tasks if "crm" in str(t.metadata["base_template"]).lower()
                    and t.metadata["multi_domain"])
    domain = get_benchmark("workbench", {"tools": "domain"}).make_environment(crm_task)
    assert any(n.startswith("customer_relationship_manager.") for n in domain.tool_names)
    assert all(n.split(".")[0] in {*crm_task.metadata["domains"], "company_directory"} for n in domain.tool_names)
    assert len(get_benchmark("workbench").make_environment(crm_task).tools()) == 27  # default: all
    with pytest.raises(UserError, match=r'benchmarks.workbench.tools: expected "domain" or "all", got \'some\''):
        get_benchmark("workbench", {"tools": "some"})
    with pytest.raises(UserError, match=r"unknown option\(s\) tool \(did you mean 'tools'\?\); accepted: tools"):
        get_benchmark("workbench", {"tool": "all"})


@pytest.mark.parametrize("module", ["benchmark.environment", "benchmark.check", "benchmark.workbench.answers",
                                    "benchmark.workbench.environment"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed
