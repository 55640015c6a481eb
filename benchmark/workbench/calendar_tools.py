"""Calendar tools (WorkBench ``calendar.*``): events with id, name, participant, start, duration (minutes).

Semantics as WorkBench implements them: search matches the query
case-insensitively as a substring of the event name or participant email
(a literal substring: WorkBench's pandas call read it as a regular expression) and
filters on the event's *start* (both bounds inclusive), returning at most 5
events in table order; a new event gets the largest id + 1, zero-padded to 8
digits; participant emails are stored lower-cased.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from benchmark.workbench.state import WorkbenchState
from benchmark.workbench.toolspec import ToolError, get_field, next_id, parse_time, tool

TABLE = "calendar"
FIELDS = '"event_id", "event_name", "participant_email", "event_start", "duration"'


def get_event_information_by_id(state: WorkbenchState, event_id: str | None = None,
                                 field: str | None = None) -> dict[str, Any]:
    return get_field(state, TABLE, event_id, field, "Event")


def search_events(state: WorkbenchState, query: str | None = None, time_min: str | None = None,
                  time_max: str | None = None) -> list[dict[str, Any]] | str:
    q = (query or "").lower()
    low = parse_time(time_min, "time_min") if time_min else None
    high = parse_time(time_max, "time_max") if time_max else None
    hits = []
    for row in state.table(TABLE).rows:
        if q not in (row["event_name"] or "").lower() and q not in (row["participant_email"] or "").lower():
            continue
        start = datetime.fromisoformat(row["event_start"])
        if (low is None or start >= low) and (high is None or start <= high):
            hits.append(dict(row))
    return hits[:5] if hits else "No events found."


def create_event(state: WorkbenchState, event_name: str | None = None, participant_email: str | None = None,
                 event_start: str | None = None, duration: str | None = None) -> str:
    if not event_name:
        raise ToolError("Event name not provided.")
    if not participant_email:
        raise ToolError("Participant email not provided.")
    if not event_start:
        raise ToolError("Event start not provided.")
    if not duration:
        raise ToolError("Event duration not provided.")
    event_id = next_id(state, TABLE)
    state.table(TABLE).rows.append({"event_id": event_id, "event_name": event_name,
                                    "participant_email": participant_email.lower(),
                                    "event_start": event_start, "duration": duration})
    return event_id


def delete_event(state: WorkbenchState, event_id: str | None = None) -> str:
    if not event_id:
        raise ToolError("Event ID not provided.")
    table = state.table(TABLE)
    if table.find(event_id) is None:
        raise ToolError("Event not found.")
    table.rows[:] = [r for r in table.rows if r["event_id"] != event_id]
    return "Event deleted successfully."


def update_event(state: WorkbenchState, event_id: str | None = None, field: str | None = None,
                 new_value: str | None = None) -> str:
    if not event_id or not field or not new_value:
        raise ToolError("Event ID, field, or new value not provided.")
    table = state.table(TABLE)
    if table.find(event_id) is None:
        raise ToolError("Event not found.")
    # WorkBench (pandas) would add a new column for an unknown field; a clear refusal instead.
    if field not in table.columns:
        raise ToolError(f"Field not valid. Please choose from: {FIELDS}.")
    if field == "participant_email":
        new_value = new_value.lower()
    for row in table.rows:
        if row["event_id"] == event_id:
            row[field] = new_value
    return "Event updated successfully."


TOOLS = [
    tool("calendar.get_event_information_by_id", get_event_information_by_id,
         "Return one field of the calendar event with the given ID, as {field: value}.", side_effects=False,
         event_id="8-digit ID of the event.", field=f"Field to return, one of {FIELDS}."),
    tool("calendar.search_events", search_events,
         "Search calendar events: the query is matched in the event name and participant email; "
         "returns at most 5 events (event_id, event_name, participant_email, event_start, duration in minutes).",
         side_effects=False,
         query="Text to look for in the event name or participant email (empty: all events).",
         time_min='Earliest event start to include, format "YYYY-MM-DD HH:MM:SS".',
         time_max='Latest event start to include, format "YYYY-MM-DD HH:MM:SS".'),
    tool("calendar.create_event", create_event,
         "Create a calendar event; returns the new event's ID.", side_effects=True,
         event_name="Name of the event.", participant_email="Email address of the participant.",
         event_start='Start time, format "YYYY-MM-DD HH:MM:SS".', duration="Duration in minutes."),
    tool("calendar.delete_event", delete_event, "Delete the calendar event with the given ID.", side_effects=True,
         event_id="8-digit ID of the event."),
    tool("calendar.update_event", update_event,
         "Set one field of the calendar event with the given ID to a new value.", side_effects=True,
         event_id="8-digit ID of the event.", field=f"Field to update, one of {FIELDS}.",
         new_value="The new value."),
]
