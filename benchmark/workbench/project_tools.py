"""Project management tools (WorkBench ``project_management.*``): tasks on boards and lists.

Semantics as WorkBench implements them: search needs at least one filter,
matches every filter case-insensitively as a substring and returns *all*
matches (no limit, ``[]`` when none).  Lists (``Backlog``, ``In Progress``,
``In Review``, ``Completed``) and boards (``Back end``, ``Front end``,
``Design``) are checked case-sensitively; an assignee must already be assigned
some task (the team); emails are stored lower-cased; a new task gets the
largest id + 1, zero-padded.
"""

from __future__ import annotations

from typing import Any

from benchmark.workbench.state import WorkbenchState
from benchmark.workbench.toolspec import ToolError, get_field, next_id, tool

TABLE = "project_management"
LISTS = ("Backlog", "In Progress", "In Review", "Completed")
BOARDS = ("Back end", "Front end", "Design")
FIELDS = '"task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"'
_SEARCH = ("task_name", "assigned_to_email", "list_name", "due_date", "board")
_BAD_LIST = "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'."
_BAD_BOARD = "Board not valid. Please choose from: 'Back end', 'Front end', 'Design'."
_BAD_ASSIGNEE = "Assignee email not valid. Please choose from the list of team members."


def _team(state: WorkbenchState) -> set[str]:
    return {r["assigned_to_email"].lower() for r in state.table(TABLE).rows if r["assigned_to_email"]}


def get_task_information_by_id(state: WorkbenchState, task_id: str | None = None,
                               field: str | None = None) -> dict[str, Any]:
    return get_field(state, TABLE, task_id, field, "Task")


def search_tasks(state: WorkbenchState, **filters: str | None) -> list[dict[str, Any]]:
    if not any(filters.values()):
        raise ToolError("No search parameters provided.")
    wanted = {k: v.lower() for k, v in filters.items() if v}
    return [dict(r) for r in state.table(TABLE).rows
            if all(r[k] is not None and v in r[k].lower() for k, v in wanted.items())]


def create_task(state: WorkbenchState, task_name: str | None = None, assigned_to_email: str | None = None,
                list_name: str | None = None, due_date: str | None = None, board: str | None = None) -> str:
    if not (task_name and assigned_to_email and list_name and due_date and board):
        raise ToolError("Missing task details.")
    assigned_to_email = assigned_to_email.lower()
    if assigned_to_email not in _team(state):
        raise ToolError(_BAD_ASSIGNEE)
    if list_name not in LISTS:
        raise ToolError(_BAD_LIST)
    if board not in BOARDS:
        raise ToolError(_BAD_BOARD)
    task_id = next_id(state, TABLE)
    state.table(TABLE).rows.append({"task_id": task_id, "task_name": task_name,
                                    "assigned_to_email": assigned_to_email, "list_name": list_name,
                                    "due_date": due_date, "board": board})
    return task_id


def delete_task(state: WorkbenchState, task_id: str | None = None) -> str:
    if not task_id:
        raise ToolError("Task ID not provided.")
    table = state.table(TABLE)
    if table.find(task_id) is None:
        raise ToolError("Task not found.")
    table.rows[:] = [r for r in table.rows if r["task_id"] != task_id]
    return "Task deleted successfully."


def update_task(state: WorkbenchState, task_id: str | None = None, field: str | None = None,
                new_value: str | None = None) -> str:
    if not task_id or not field or not new_value:
        raise ToolError("Task ID, field, or new value not provided.")
    if field == "assigned_to_email":
        new_value = new_value.lower()
    if field == "board" and new_value not in BOARDS:
        raise ToolError(_BAD_BOARD)
    if field == "list_name" and new_value not in LISTS:
        raise ToolError(_BAD_LIST)
    if field == "assigned_to_email" and new_value not in _team(state):
        raise ToolError(_BAD_ASSIGNEE)
    table = state.table(TABLE)
    if table.find(task_id) is None:
        raise ToolError("Task not found.")
    if field not in table.columns:
        raise ToolError(f"Field not valid. Please choose from: {FIELDS}.")
    for row in table.rows:
        if row["task_id"] == task_id:
            row[field] = new_value
    return "Task updated successfully."


_DUE = 'Due date, format "YYYY-MM-DD".'
_LIST = "List, one of " + ", ".join(f'"{v}"' for v in LISTS) + "."
_BOARD = "Board, one of " + ", ".join(f'"{v}"' for v in BOARDS) + "."
TOOLS = [
    tool("project_management.get_task_information_by_id", get_task_information_by_id,
         "Return one field of the task with the given ID, as {field: value}.", side_effects=False,
         task_id="8-digit ID of the task.", field=f"Field to return, one of {FIELDS}."),
    tool("project_management.search_tasks", search_tasks,
         "Search tasks by any of the filters (at least one; each matches part of the field); returns all matches.",
         side_effects=False, task_name="Name of the task.", assigned_to_email="Email address of the assignee.",
         list_name=_LIST, due_date=_DUE, board=_BOARD),
    tool("project_management.create_task", create_task, "Create a task (every field required); returns its ID.",
         side_effects=True, task_name="Name of the task.",
         assigned_to_email="Email address of the assignee (a team member).", list_name=_LIST, due_date=_DUE,
         board=_BOARD),
    tool("project_management.delete_task", delete_task, "Delete the task with the given ID.", side_effects=True,
         task_id="8-digit ID of the task."),
    tool("project_management.update_task", update_task,
         "Set one field of the task with the given ID to a new value.", side_effects=True,
         task_id="8-digit ID of the task.",
         field='Field to update, one of "task_name", "assigned_to_email", "list_name", "due_date", "board".',
         new_value="The new value."),
]
