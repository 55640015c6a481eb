"""One run's browsing tools: ``search`` and ``open_page`` over a search backend, with the action log.

Both tools only read: nothing a run does changes what the next call sees, so every branch of a multi-agent
run sees the same web, and :meth:`BrowseCompEnvironment.changes_state` is False for both. Every call is in
the action log (and so in the trace, attributed to the agent that made it, like WorkBench's).

>>> from benchmark.browsecomp.search import Hit, Page
>>> class Web:
...     kind = "local"
...     def search(self, query, k): return [Hit(docid="d1", title="Harbour", snippet="a red lighthouse")]
...     def open_page(self, docid): return Page(docid="d1", title="Harbour", text="The lighthouse is red.")
>>> env = BrowseCompEnvironment(Web(), top_k=5, page_chars=100)
>>> env.call("search", {"query": "lighthouse"}).output
'[1] docid: d1\\n    title: Harbour\\n    a red lighthouse'
>>> env.call("open_page", {"url": "d1"})
ToolResult(ok=False, output="Bad arguments for open_page: expected {'docid': '<text>'}, got url")
>>> [a.name for a in env.fork().actions]
['search', 'open_page']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchmark.browsecomp.search import SearchBackend, format_hits, format_page
from benchmark.environment import ActionRecord, Environment, ToolResult

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

TOOL_ARGS = {"search": "query", "open_page": "docid"}
"""Each tool's one argument."""


def _descriptions(kind: str, top_k: int) -> dict[str, tuple[str, str]]:
    where = "the web" if kind == "hosted" else "the document collection"
    page = "the URL of a search result" if kind == "hosted" else "the docid of a search result"
    return {
        "search": (f"Search {where}; returns the best {top_k} results (docid, title, snippet).",
                   "keywords or a question"),
        "open_page": ("Open one result and read its text.", page),
    }


class BrowseCompEnvironment(Environment):
    """The tools of one run over ``backend`` (shared, read-only) and this run's action log."""

    def __init__(self, backend: SearchBackend, *, top_k: int, page_chars: int,
                 log: Sequence[ActionRecord] = ()) -> None:
        self.backend = backend
        self.top_k = top_k
        self.page_chars = page_chars
        self._log = list(log)
        self._tools: list[BaseTool] | None = None

    def tools(self) -> list[BaseTool]:
        if self._tools is None:
            from langchain_core.tools import StructuredTool, ToolException

            def tool(name: str, description: str, arg_help: str) -> StructuredTool:
                def run(**kwargs: object) -> str:
                    result = self.call(name, kwargs)
                    if not result.ok:
                        raise ToolException(result.output)
                    return result.output

                arg = TOOL_ARGS[name]
                schema = {"type": "object", "properties": {arg: {"type": "string", "description": arg_help}},
                          "required": [arg], "additionalProperties": False, "description": description}
                return StructuredTool.from_function(func=run, name=name, description=description, args_schema=schema,
                                                    handle_tool_error=True)

            self._tools = [tool(n, d, a) for n, (d, a) in _descriptions(self.backend.kind, self.top_k).items()]
        return list(self._tools)

    def _run(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        arg = TOOL_ARGS.get(name)
        if arg is None:
            return ToolResult(ok=False, output=f"Unknown tool {name!r}; the tools are: {', '.join(TOOL_ARGS)}")
        value = args.get(arg) if isinstance(args, Mapping) else None
        if set(args if isinstance(args, Mapping) else ()) != {arg} or not isinstance(value, str) or not value.strip():
            got = ", ".join(map(str, args)) if isinstance(args, Mapping) else type(args).__name__
            return ToolResult(ok=False, output=f"Bad arguments for {name}: expected {{'{arg}': '<text>'}}, "
                                               f"got {got or 'none'}")
        if name == "search":
            return ToolResult(ok=True, output=format_hits(value, self.backend.search(value, self.top_k)))
        page = self.backend.open_page(value.strip())
        if page is None:
            return ToolResult(ok=False, output=f"No page {value!r}: open a docid from the search results.")
        return ToolResult(ok=True, output=format_page(page, self.page_chars))

    def call(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        try:
            result = self._run(str(name), args)
        except Exception as err:  # noqa: BLE001 -- a failed search (a hosted service down) is the agent's to see
            result = ToolResult(ok=False, output=f"{type(err).__name__}: {err}")
        logged = dict(args) if isinstance(args, Mapping) else {"_raw": repr(args)[:500]}
        self._log.append(ActionRecord(name=str(name), args=logged, ok=result.ok, output=result.output))
        return result

    def fork(self) -> BrowseCompEnvironment:
        return BrowseCompEnvironment(self.backend, top_k=self.top_k, page_chars=self.page_chars, log=self._log)

    @property
    def actions(self) -> list[ActionRecord]:
        return list(self._log)

    def changes_state(self, name: str) -> bool:
        """Neither tool changes anything (see the module docstring)."""
        return False
