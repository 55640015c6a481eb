"""The vendored WorkBench files (``data/``, MIT, see ``data/SOURCE.md``), read offline from the package.

Sandbox tables are read as strings, like WorkBench's ``pd.read_csv(..., dtype=str)``:
an empty cell is ``None`` (pandas' NaN), every other cell its text.
"""

from __future__ import annotations

import ast
import csv
import io
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from descriptor.errors import UserError

# (domain file stem, table file, primary key); "analytics" is the read-only visit log.
TABLE_FILES = {
    "calendar": ("calendar_events.csv", "event_id"),
    "email": ("emails.csv", "email_id"),
    "project_management": ("project_tasks.csv", "task_id"),
    "customer_relationship_manager": ("customer_relationship_manager_data.csv", "customer_id"),
}
ANALYTICS_FILE = "analytics_data.csv"
DIRECTORY_FILE = "raw/email_addresses.csv"
# Query files in the order WorkBench lists its domains; "multi_domain" holds the cross-domain tasks.
QUERY_FILES = ("analytics", "calendar", "customer_relationship_manager", "email", "multi_domain",
               "project_management")


def data_text(relative: str) -> str:
    """The text of a vendored data file (``relative`` to ``benchmark/workbench/data``)."""
    path = resources.files("benchmark.workbench").joinpath("data", *relative.split("/"))
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as exc:
        raise UserError(f"WorkBench data file missing from the package: {relative} ({exc}); "
                        "reinstall the project (`pip install -e .`)") from None


def read_table(relative: str) -> tuple[tuple[str, ...], list[dict[str, str | None]]]:
    """(columns, rows) of a CSV with a header; empty cells become ``None``."""
    reader = csv.DictReader(io.StringIO(data_text(relative), newline=""))
    columns = tuple(reader.fieldnames or ())
    rows = [{k: (v if v != "" else None) for k, v in row.items()} for row in reader]
    return columns, rows


@lru_cache(maxsize=1)
def directory() -> tuple[str, ...]:
    """The company directory: one email address a line, no header (as in WorkBench)."""
    return tuple(line.strip() for line in data_text(DIRECTORY_FILE).splitlines() if line.strip())


@dataclass(kw_only=True, frozen=True, slots=True)
class QueryRow:
    """One row of a ``*_queries_and_answers.csv`` file."""

    source: str
    """The file's domain stem, e.g. ``calendar`` or ``multi_domain``."""
    index: int
    """0-based row number within the file."""
    query: str
    answer: tuple[str, ...]
    """The expected calls as WorkBench writes them, e.g. ``calendar.delete_event.func(event_id="00000256")``."""
    base_template: str
    chosen_template: str
    domains: tuple[str, ...]
    """As written in the file (multi-domain rows say ``crm`` for customer_relationship_manager)."""


def _literal_list(text: str, where: str) -> tuple[str, ...]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise UserError(f"{where}: expected a Python list of strings, got {text[:80]!r}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: expected a list of strings")
    return tuple(value)


@lru_cache(maxsize=1)
def query_rows() -> tuple[QueryRow, ...]:
    """All 690 tasks, file by file in :data:`QUERY_FILES` order, rows in file order."""
    out = []
    for source in QUERY_FILES:
        name = f"queries_and_answers/{source}_queries_and_answers.csv"
        reader = csv.DictReader(io.StringIO(data_text(name), newline=""))
        for i, row in enumerate(reader):
            where = f"{name}: row {i + 1}"
            out.append(QueryRow(source=source, index=i, query=row["query"].strip(),
                                answer=_literal_list(row["answer"], f"{where} field answer"),
                                base_template=row["base_template"].strip(),
                                chosen_template=row["chosen_template"].strip(),
                                domains=_literal_list(row["domains"], f"{where} field domains")))
    return tuple(out)
