"""The WorkBench sandbox: four mutable tables plus the plots made, and the read-only analytics log.

Rows are dicts of strings (``None`` for an empty cell), in table order: a new
row is appended, a deleted row removed, an update changes a row in place, as
WorkBench's pandas tables do.  :meth:`WorkbenchState.copy` copies the mutable
tables (about 1,300 small dicts, well under a millisecond); the analytics log
and the company directory are never written and are shared.

Comparison follows WorkBench's evaluation: every text field is compared
lower-cased except ``status``, ``list_name`` and ``board`` (where case is
meaningful).  Tables compare as multisets of rows: WorkBench compares pandas
frames positionally, which only differs when identical rows are in another
order (two plots made in the other order; ids make every other row unique).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from benchmark.workbench.data import ANALYTICS_FILE, TABLE_FILES, directory, read_table

Row = dict[str, str | None]
PLOTS = "analytics"
"""The analytics domain's state is the list of plots made (WorkBench's ``PLOTS_DATA``)."""
CASE_SENSITIVE_FIELDS = frozenset({"status", "list_name", "board"})
TABLE_NAMES = ("calendar", "email", PLOTS, "project_management", "customer_relationship_manager")


@dataclass(slots=True)
class Table:
    columns: tuple[str, ...]
    rows: list[Row]
    key: str | None
    """The id column (None for plots, which have no id)."""

    def copy(self) -> Table:
        return Table(self.columns, [dict(r) for r in self.rows], self.key)

    def find(self, value: str) -> Row | None:
        """The first row whose key equals ``value`` (exact, like WorkBench's ``==``)."""
        return next((r for r in self.rows if r.get(self.key) == value), None)

    def max_id(self) -> str | None:
        """The largest id as a string (string order, as pandas' ``max`` on a str column)."""
        ids = [r[self.key] for r in self.rows if r.get(self.key) is not None]
        return max(ids) if ids else None


def normalize_row(row: Row) -> tuple[tuple[str, str | None], ...]:
    """A hashable, case-folded form of a row for comparison."""
    return tuple(sorted((k, v.lower() if isinstance(v, str) and k not in CASE_SENSITIVE_FIELDS else v)
                        for k, v in row.items()))


@dataclass(slots=True)
class WorkbenchState:
    tables: dict[str, Table]
    analytics: tuple[Row, ...]
    """The visit log (``user_engaged`` already a bool); read-only."""
    directory: tuple[str, ...]

    @classmethod
    def initial(cls) -> WorkbenchState:
        """A fresh copy of the sandbox as shipped (the data is read once per process)."""
        return _initial().copy()

    @staticmethod
    def pristine() -> WorkbenchState:
        """The shipped sandbox itself, shared: for comparisons only, never to be changed."""
        return _initial()

    def copy(self) -> WorkbenchState:
        return WorkbenchState({k: t.copy() for k, t in self.tables.items()}, self.analytics, self.directory)

    def table(self, name: str) -> Table:
        return self.tables[name]



def diff_rows(a: WorkbenchState, b: WorkbenchState) -> dict[str, int]:
    """Per table, how many rows differ between ``a`` and ``b`` (only tables that differ).

    A row present in one state only counts once; an id present in both with
    different contents counts once (not as a removal plus an addition).
    """
    out = {}
    for name in TABLE_NAMES:
        if a.tables[name].rows == b.tables[name].rows:  # the usual case, and much cheaper than normalizing
            continue
        sig_a = Counter(normalize_row(r) for r in a.tables[name].rows)
        sig_b = Counter(normalize_row(r) for r in b.tables[name].rows)
        if sig_a == sig_b:
            continue
        key = a.tables[name].key
        only_a, only_b = sig_a - sig_b, sig_b - sig_a
        if key is None:
            out[name] = sum(only_a.values()) + sum(only_b.values())
            continue
        ids_a = Counter(dict(r)[key] for r in only_a.elements())
        ids_b = Counter(dict(r)[key] for r in only_b.elements())
        out[name] = sum((ids_a | ids_b).values())
    return out


@lru_cache(maxsize=1)
def _initial() -> WorkbenchState:
    tables = {}
    for name, (file, key) in TABLE_FILES.items():
        columns, rows = read_table(file)
        tables[name] = Table(columns, rows, key)
    tables[PLOTS] = Table(("file_path",), [], None)
    _, visits = read_table(ANALYTICS_FILE)
    analytics = tuple({**r, "user_engaged": r["user_engaged"] == "True"} for r in visits)
    return WorkbenchState(tables, analytics, directory())
