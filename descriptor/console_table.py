"""Tables for a terminal that cut nothing: too many columns for its width become several tables, each led by the
key columns (the names), and a row whose names alone do not fit is printed as a record.

A column's width is the longest of its header lines and cells, fixed: rich never shrinks it (which it does by
cutting with "…"). Off a terminal (a log, a pipe: ``width`` None) one table holds every column, as wide as its
content.

>>> import io
>>> from rich.console import Console
>>> console = Console(file=io.StringIO(), width=30, color_system=None)
>>> cols = [Column(header="system", cells=("debate", "sas")), Column(header="success", cells=("0.667", "0.333"),
...         right=True), Column(header="tokens\\nper run", cells=("5,487", "1,320"), right=True)]
>>> print_columns(console, cols, keys=1, width=20)
>>> print(console.file.getvalue().rstrip())
system  success
───────────────
debate    0.667
sas       0.333
<BLANKLINE>
         tokens
system  per run
───────────────
debate    5,487
sas       1,320
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


@dataclass(kw_only=True, frozen=True, slots=True)
class Column:
    """One column: its header (``\\n`` between the lines of a header on several lines) and its cells, as text."""

    header: str
    cells: tuple[str, ...]
    right: bool = False
    """Right-justified (numbers)."""

    def width(self) -> int:
        """Characters the widest header line or cell needs."""
        return max(len(s) for s in (*self.header.split("\n"), *self.cells))


def _table(columns: Sequence[Column], fixed: bool) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True, highlight=False)
    for c in columns:
        width = c.width() if fixed else None
        header = c.header if fixed else " ".join(c.header.split("\n"))  # a log's table: one header line
        table.add_column(header, justify="right" if c.right else "left", vertical="bottom", no_wrap=True,
                         width=width, min_width=width)
    for row in zip(*(c.cells for c in columns), strict=True):
        table.add_row(*row)
    return table


def table_width(console: Console, columns: Sequence[Column]) -> int:
    """Characters the table of ``columns`` takes, borders and padding included."""
    # measured without the console's width as a bound (rich clamps a measurement to it)
    return console.measure(_table(columns, fixed=True), options=console.options.update_width(10_000)).maximum


def split_columns(console: Console, columns: Sequence[Column], keys: int, width: int) -> list[list[Column]] | None:
    """The columns in groups, each the ``keys`` leading columns and as many of the others, in order, as fit in
    ``width``; None when the key columns and any single other column do not fit together."""
    lead, rest = list(columns[:keys]), list(columns[keys:])
    groups: list[list[Column]] = []
    group = list(lead)
    for c in rest:
        if table_width(console, [*group, c]) <= width:
            group.append(c)
            continue
        if len(group) == keys or table_width(console, [*lead, c]) > width:
            return None
        groups.append(group)
        group = [*lead, c]
    groups.append(group)
    return groups


def records(columns: Sequence[Column], keys: int) -> str:
    """Each row as a record: its key cells on one line, then one ``header: value`` line per other column (a name
    longer than the terminal goes on for the terminal to wrap, never cut)."""
    lines: list[str] = []
    for i in range(len(columns[0].cells) if columns else 0):
        lines.append(" / ".join(c.cells[i] for c in columns[:keys]))
        lines.extend(f"  {' '.join(c.header.split())}: {c.cells[i]}" for c in columns[keys:])
    return "\n".join(lines)


def print_columns(console: Console, columns: Sequence[Column], keys: int, width: int | None = None) -> None:
    """Print ``columns`` on ``console``: at ``width`` (default the console's when it is a terminal), split into
    tables that fit or, when even one does not, as records; off a terminal, one table of its natural width."""
    if not columns:
        return
    if width is None and console.is_terminal:
        width = console.width
    if width is None:  # as wide as the content, so the console must be wider (a log's: 10,000 columns)
        console.print(_table(columns, fixed=False))
        return
    groups = split_columns(console, columns, keys, width)
    if groups is None:
        console.print(records(columns, keys), soft_wrap=True, markup=False, highlight=False)
        return
    for i, group in enumerate(groups):
        if i:
            console.print()
        console.print(_table(group, fixed=True), width=width)


def print_table(rows: list[dict[str, object]], title: str) -> None:
    """``title``, then ``rows`` as a table that cuts no value or header: on a narrow terminal it is split into
    several tables led by the first column; off a terminal, one table."""
    from rich.console import Console

    terminal = sys.stdout.isatty()
    console = Console(highlight=False, width=None if terminal else 10_000)
    if not rows:
        console.print(f"{title}: (no rows)", markup=False)
        return
    console.print(title, soft_wrap=True, markup=False)
    columns = [Column(header=col, right=isinstance(rows[0][col], int | float),
                      cells=tuple(f"{v:.3f}" if isinstance(v, float) else str(v) for v in (r.get(col) for r in rows)))
               for col in rows[0]]
    print_columns(console, columns, keys=1, width=console.width if terminal else None)

