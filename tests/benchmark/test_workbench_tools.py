"""WorkBench tools: semantics on small cases, bad arguments as error strings, the LangChain form, forks."""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool

from benchmark.workbench import TOOLS, WorkbenchEnvironment, WorkbenchState, select_tools
from benchmark.workbench.toolspec import CURRENT_TIME


@pytest.fixture
def env() -> WorkbenchEnvironment:
    return WorkbenchEnvironment(task_id="t", tool_names=tuple(TOOLS))


def ok(env: WorkbenchEnvironment, name: str, /, **args: object) -> object:
    result = env.call(name, args)
    assert result.ok, result.output
    try:
        return json.loads(result.output)
    except json.JSONDecodeError:
        return result.output


def fails(env: WorkbenchEnvironment, name: str, /, **args: object) -> str:
    result = env.call(name, args)
    assert not result.ok, result.output
    return result.output


def rows(env: WorkbenchEnvironment, table: str) -> list[dict]:
    return env.state.tables[table].rows


# ---------------------------------------------------------------- calendar

def test_calendar_search_filters_and_limits(env: WorkbenchEnvironment) -> None:
    hits = ok(env, "calendar.search_events", query="LUIS")
    assert 0 < len(hits) <= 5 and all("luis" in (h["participant_email"] + h["event_name"]).lower() for h in hits)
    day = ok(env, "calendar.search_events", time_min="2023-12-13 00:00:00", time_max="2023-12-13 23:59:59")
    assert day and all(h["event_start"].startswith("2023-12-13") for h in day)
    # both bounds inclusive, on the event's start
    first = day[0]["event_start"]
    assert ok(env, "calendar.search_events", time_min=first, time_max=first)[0]["event_start"] == first
    assert ok(env, "calendar.search_events", query="no such meeting") == "No events found."
    assert "Invalid time_min" in fails(env, "calendar.search_events", time_min="next tuesday")


def test_calendar_create_update_delete(env: WorkbenchEnvironment) -> None:
    top = max(r["event_id"] for r in rows(env, "calendar"))
    new_id = ok(env, "calendar.create_event", event_name="Sync", participant_email="Raj.Patel@Atlas.com",
                event_start="2023-12-01 09:00:00", duration=30)  # a number is taken as text
    assert new_id == str(int(top) + 1).zfill(8)
    assert rows(env, "calendar")[-1] == {"event_id": new_id, "event_name": "Sync",
                                         "participant_email": "raj.patel@atlas.com",
                                         "event_start": "2023-12-01 09:00:00", "duration": "30"}
    assert ok(env, "calendar.get_event_information_by_id", event_id=new_id, field="duration") == {"duration": "30"}
    assert ok(env, "calendar.update_event", event_id=new_id, field="event_name", new_value="Renamed") == \
        "Event updated successfully."
    assert fails(env, "calendar.update_event", event_id=new_id, field="colour", new_value="red").startswith(
        "Field not valid")
    assert ok(env, "calendar.delete_event", event_id=new_id) == "Event deleted successfully."
    assert fails(env, "calendar.delete_event", event_id=new_id) == "Event not found."
    assert fails(env, "calendar.get_event_information_by_id", event_id=new_id, field="duration") == "Event not found."
    assert fails(env, "calendar.create_event", event_name="x") == "Participant email not provided."
    assert fails(env, "calendar.delete_event") == "Event ID not provided."


# ---------------------------------------------------------------- email

def test_email_search_needs_every_word_newest_first(env: WorkbenchEnvironment) -> None:
    hits = ok(env, "email.search_emails", query="update raj")
    assert hits and len(hits) <= 5
    assert all(w in f"{h['subject']} {h['body']} {h['sender/recipient']}".lower() for w in ("update", "raj")
               for h in hits)
    stamps = [h["sent_datetime"] for h in hits]
    assert stamps == sorted(stamps, reverse=True)
    dated = ok(env, "email.search_emails", date_min="2023-11-01", date_max="2023-11-01")
    assert all(h["sent_datetime"].startswith("2023-11-01") for h in dated)


def test_email_send_forward_reply(env: WorkbenchEnvironment) -> None:
    assert ok(env, "email.send_email", recipient="Kofi.Mensah@atlas.com", subject="Hi", body="Hello") == \
        "Email sent successfully."
    sent = rows(env, "email")[-1]
    # WorkBench's id rule: largest id + 1, not zero-padded
    assert sent == {"email_id": "500", "inbox/outbox": "outbox", "sender/recipient": "kofi.mensah@atlas.com",
                    "subject": "Hi", "sent_datetime": CURRENT_TIME, "body": "Hello"}
    original = rows(env, "email")[0]
    assert ok(env, "email.forward_email", email_id=original["email_id"], recipient="nadia.moreau@atlas.com") == \
        "Email forwarded successfully."
    fwd = rows(env, "email")[-1]
    assert (fwd["email_id"], fwd["subject"], fwd["body"]) == ("501", f"FW: {original['subject']}", original["body"])
    assert ok(env, "email.reply_email", email_id=original["email_id"], body="Thanks") == "Email replied successfully."
    reply = rows(env, "email")[-1]
    assert (reply["sender/recipient"], reply["subject"]) == (original["sender/recipient"], original["subject"])
    assert fails(env, "email.send_email", recipient="kofi", subject="x", body="y") == "Invalid recipient email address."
    assert fails(env, "email.forward_email", email_id="nope", recipient="a@b.c") == "Email not found."
    assert fails(env, "email.reply_email", email_id=original["email_id"]) == "Email ID or body not provided."


# ---------------------------------------------------------------- analytics

def test_analytics_counts_and_plots(env: WorkbenchEnvironment) -> None:
    visits = ok(env, "analytics.total_visits_count", time_min="2023-11-01", time_max="2023-11-07")
    in_range = [r for r in env.state.analytics if "2023-11-01" <= r["date_of_visit"] <= "2023-11-07"]
    assert sum(visits.values()) == len(in_range) and list(visits) == sorted(visits)
    by_source = [ok(env, "analytics.traffic_source_count", time_min="2023-11-01", time_max="2023-11-07",
                    traffic_source=s) for s in ("direct", "referral", "search engine", "social media")]
    assert sum(sum(d.values()) for d in by_source) == len(in_range)
    engaged = ok(env, "analytics.engaged_users_count", time_min="2023-11-01", time_max="2023-11-07")
    assert sum(engaged.values()) == sum(r["user_engaged"] for r in in_range)
    path = ok(env, "analytics.create_plot", time_min="2023-11-01", time_max="2023-11-29",
              value_to_plot="total_visits", plot_type="bar")
    assert path == "plots/2023-11-01_2023-11-29_total_visits_bar.png"
    assert rows(env, "analytics") == [{"file_path": path}]
    assert fails(env, "analytics.create_plot", time_min="2023-11-01", time_max="2023-11-29",
                 value_to_plot="total_visits", plot_type="pie").startswith("Plot type must be one of")
    assert fails(env, "analytics.get_visitor_information_by_id", visitor_id="nobody") == "Visitor not found."


# ---------------------------------------------------------------- CRM, projects, directory

def test_crm_search_update_add_delete(env: WorkbenchEnvironment) -> None:
    assert fails(env, "customer_relationship_manager.search_customers").startswith("No search parameters")
    leads = ok(env, "customer_relationship_manager.search_customers", status="lead", product_interest="software")
    assert 0 < len(leads) <= 5 and all(c["status"] == "Lead" and c["product_interest"] == "Software" for c in leads)
    cid = leads[0]["customer_id"]
    assert fails(env, "customer_relationship_manager.update_customer", customer_id=cid, field="status",
                 new_value="won").startswith("Status not valid")  # case matters for statuses
    ok(env, "customer_relationship_manager.update_customer", customer_id=cid, field="assigned_to_email",
       new_value="Raj.Patel@atlas.com")
    assert env.state.tables["customer_relationship_manager"].find(cid)["assigned_to_email"] == "raj.patel@atlas.com"
    new_id = ok(env, "customer_relationship_manager.add_customer", customer_name="Ada Lovelace",
                assigned_to_email="raj.patel@atlas.com", status="Lead")
    added = rows(env, "customer_relationship_manager")[-1]
    assert added["customer_id"] == new_id == "00000200" and added["notes"] == "" and added["customer_phone"] is None
    ok(env, "customer_relationship_manager.delete_customer", customer_id=new_id)
    assert fails(env, "customer_relationship_manager.delete_customer", customer_id=new_id) == "Customer not found."


def test_project_tasks_rules(env: WorkbenchEnvironment) -> None:
    mine = ok(env, "project_management.search_tasks", assigned_to_email="carlos")
    assert len(mine) > 5  # no limit on task search
    assert ok(env, "project_management.search_tasks", task_name="no such task") == []
    args = dict(task_name="Write docs", assigned_to_email="Carlos.Rodriguez@atlas.com", list_name="Backlog",
                due_date="2023-12-08", board="Design")
    assert fails(env, "project_management.create_task", **{**args, "board": "design"}).startswith("Board not valid")
    assert fails(env, "project_management.create_task", **{**args, "assigned_to_email": "raj.patel@atlas.com"}) \
        .startswith("Assignee email not valid")  # raj has no task: not on the team
    tid = ok(env, "project_management.create_task", **args)
    assert ok(env, "project_management.update_task", task_id=tid, field="list_name", new_value="In Review") == \
        "Task updated successfully."
    assert fails(env, "project_management.update_task", task_id=tid, field="list_name",
                 new_value="Done").startswith("List not valid")
    assert ok(env, "project_management.get_task_information_by_id", task_id=tid, field="list_name") == \
        {"list_name": "In Review"}


def test_directory_lookup(env: WorkbenchEnvironment) -> None:
    assert ok(env, "company_directory.find_email_address", name="Patel") == ["anaya.patel@atlas.com",
                                                                              "raj.patel@atlas.com"]
    assert ok(env, "company_directory.find_email_address", name="zzz") == []
    assert fails(env, "company_directory.find_email_address") == "Name not provided."


# ---------------------------------------------------------------- bad calls never raise, always logged

def test_bad_arguments_are_error_strings_and_logged(env: WorkbenchEnvironment) -> None:
    msg = fails(env, "calendar.delete_event", event_id="00000256", colour="red")
    assert "unknown argument 'colour'" in msg and "accepted: event_id" in msg
    assert "argument 'event_id'" in fails(env, "calendar.delete_event", event_id={"id": 1})
    listed = env.call("calendar.delete_event", ["00000256"])  # type: ignore[arg-type]
    assert not listed.ok and "expected an object" in listed.output
    assert "Unknown tool 'calendar.cancel'" in fails(env, "calendar.cancel", event_id="1")
    log = env.actions
    assert [(a.name, a.ok) for a in log] == [("calendar.delete_event", False)] * 3 + [("calendar.cancel", False)]
    assert log[0].args == {"event_id": "00000256", "colour": "red"}
    assert env.state.tables["calendar"].find("00000256") is not None  # nothing happened


def test_domain_selection_limits_the_tools() -> None:
    names = select_tools("domain", ["calendar"])
    assert {n.split(".")[0] for n in names} == {"calendar", "company_directory"}
    assert {n.split(".")[0] for n in select_tools("domain", ["crm", "email"])} == \
        {"customer_relationship_manager", "email", "company_directory"}
    assert len(select_tools("all", ["calendar"])) == len(TOOLS) == 27
    env = WorkbenchEnvironment(task_id="t", tool_names=names)
    assert "this task's tools are" in fails(env, "email.send_email", recipient="a@b.c", subject="s", body="b")
    assert len(env.state.tables["email"].rows) == 500


# ---------------------------------------------------------------- LangChain tools

def test_langchain_tools_have_openai_names_and_schemas(env: WorkbenchEnvironment) -> None:
    tools = env.tools()
    assert len(tools) == 27
    for t in tools:
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t.name)
        spec = convert_to_openai_tool(t)["function"]
        assert spec["name"] == t.name and spec["parameters"]["type"] == "object"
        assert all(p["type"] == "string" for p in spec["parameters"]["properties"].values())
    delete = next(t for t in tools if t.name == "calendar__delete_event")
    done = delete.invoke({"type": "tool_call", "name": delete.name, "args": {"event_id": "00000256"}, "id": "c1"})
    assert done.content == "Event deleted successfully." and done.status == "success"
    again = delete.invoke({"type": "tool_call", "name": delete.name, "args": {"event_id": "00000256"}, "id": "c2"})
    assert again.content == "Event not found." and again.status == "error"
    bad = delete.invoke({"type": "tool_call", "name": delete.name, "args": {"eventid": "1"}, "id": "c3"})
    assert bad.status == "error" and "unknown argument 'eventid'" in bad.content
    assert [(a.name, a.ok) for a in env.actions] == [("calendar.delete_event", True), ("calendar.delete_event", False),
                                                     ("calendar.delete_event", False)]


# ---------------------------------------------------------------- state and forks

def test_forks_are_independent(env: WorkbenchEnvironment) -> None:
    ok(env, "calendar.delete_event", event_id="00000256")
    fork = env.fork()
    assert [a.name for a in fork.actions] == ["calendar.delete_event"]  # the history so far comes along
    ok(fork, "email.send_email", recipient="a@b.co", subject="s", body="b")
    ok(env, "calendar.delete_event", event_id="00000013")
    assert len(env.state.tables["email"].rows) == 500 and len(fork.state.tables["email"].rows) == 501
    assert fork.state.tables["calendar"].find("00000013") is not None
    assert len(env.actions) == 2 and len(fork.actions) == 2
    assert fork.tools()[0] is not env.tools()[0]


def test_fresh_states_do_not_share_rows() -> None:
    a, b = WorkbenchState.initial(), WorkbenchState.initial()
    a.tables["calendar"].rows[0]["event_name"] = "changed"
    assert b.tables["calendar"].rows[0]["event_name"] != "changed"
    assert WorkbenchState.pristine().tables["calendar"].rows[0]["event_name"] != "changed"
