"""The company directory (WorkBench ``company_directory.find_email_address``): names to email addresses.

The directory is a list of 20 addresses (``first.last@atlas.com``); a look-up
returns every address containing the name, lower-cased (``[]`` when none).
"""

from __future__ import annotations

from benchmark.workbench.state import WorkbenchState
from benchmark.workbench.toolspec import ToolError, tool


def find_email_address(state: WorkbenchState, name: str | None = None) -> list[str]:
    if not name:
        raise ToolError("Name not provided.")
    needle = name.lower()
    return [address for address in state.directory if needle in address]


TOOLS = [
    tool("company_directory.find_email_address", find_email_address,
         "Find the email addresses of colleagues by name (any part of the name).", side_effects=False,
         name="Name of the person, e.g. a first name."),
]
