"""The documentation: the reference pages the docs site makes from the code, README's promises, the site's build."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells(table: str) -> list[list[str]]:
    """The rows of the Markdown tables in ``table`` whose first cell is a key, split into cells (``\\|`` kept)."""
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in table.splitlines() if line.startswith("| `")]


def test_every_config_key_has_a_description_in_the_reference():
    rows = _cells(_hooks().config_reference())
    assert len(rows) >= 80
    undocumented = [row[0] for row in rows if not row[3]]
    assert undocumented == []
    assert all(len(row) == 4 for row in rows), [row for row in rows if len(row) != 4]


def test_the_config_reference_names_app_systems_and_reads_as_markdown():
    text = _hooks().config_reference()
    assert "### `[systems.NAME]`" in text and "| `systems.NAME.graph` |" in text
    assert ":mod:`" not in text and ":data:`" not in text and "``" not in text
    assert "NoneType" not in text
    # a table's heading is its model's whole first paragraph, not its first line
    assert "recorded as finished with `limit`) and per sweep" in text


def test_the_cli_reference_has_every_command_and_sub_command():
    text = _hooks().cli_reference()
    for command in ("## `mas-econ run`", "## `mas-econ view`", "### `mas-econ model serve`",
                    "### `mas-econ model stop`", "## `mas-econ label-failures`"):
        assert command in text, command
