"""The hosted search backend: a LangChain web-search tool for ``search``, an HTTP GET for ``open_page``.

UNTESTED HERE: no test calls a search service (the tests run offline); only the parsing of results is
tested, with a stand-in tool. Option ``hosted_tool`` picks the tool:

- ``tavily``: ``langchain_tavily.TavilySearch`` (``pip install langchain-tavily``), key from
  ``TAVILY_API_KEY``;
- ``duckduckgo``: ``langchain_community.tools.DuckDuckGoSearchResults`` (``pip install langchain-community
  duckduckgo-search``), no key;
- ``module:Class``: any LangChain ``BaseTool`` made with no arguments (it reads its own key from the
  environment) that takes ``{"query": ...}``.

Keys are read from the environment by the tool itself and never stored by us. Results and pages are kept
per process, so the replays that rebuild a run's environment (:mod:`mas.topologies.environment`) ask the
service once per distinct query or URL and see what the run saw.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from html.parser import HTMLParser
from typing import Any

from benchmark.browsecomp.search import Hit, Page
from descriptor.errors import UserError

KNOWN_TOOLS: dict[str, tuple[str, str, str | None, str]] = {
    # name: (module, class, key variable, package to install)
    "tavily": ("langchain_tavily", "TavilySearch", "TAVILY_API_KEY", "langchain-tavily"),
    "duckduckgo": ("langchain_community.tools", "DuckDuckGoSearchResults", None,
                   "langchain-community duckduckgo-search"),
}
PAGE_TIMEOUT_S = 20.0


def make_tool(spec: str) -> Any:
    """The LangChain tool ``spec`` names (see the module docstring); ``UserError`` naming what is missing."""
    if spec in KNOWN_TOOLS:
        module, cls, key, package = KNOWN_TOOLS[spec]
        if key is not None and not os.environ.get(key):
            raise UserError(f"benchmarks.browsecomp.hosted_tool = {spec!r} needs the environment variable {key}")
    elif ":" in spec:
        module, cls = spec.split(":", 1)
        package = module.split(".")[0]
    else:
        raise UserError(f"benchmarks.browsecomp.hosted_tool: expected {', '.join(KNOWN_TOOLS)} or 'module:Class', "
                        f"got {spec!r}")
    try:
        tool_cls = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as err:
        raise UserError(f"benchmarks.browsecomp.hosted_tool = {spec!r}: cannot import {module}.{cls} ({err}); "
                        f"install it: pip install {package}") from None
    kwargs = {"output_format": "list"} if cls == "DuckDuckGoSearchResults" else {}
    return tool_cls(**kwargs)


def hits_of(result: Any) -> list[Hit]:
    """Search results in the shapes LangChain's tools return (a JSON string, ``{"results": [...]}`` or a list of
    dicts with ``url``/``link``, ``title`` and ``content``/``snippet``/``body``).

    >>> hits_of('[{"link": "https://a.example", "title": "A", "snippet": "about a"}]')
    [Hit(docid='https://a.example', title='A', snippet='about a')]
    """
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except ValueError:
            return [Hit(docid="", title="(search results)", snippet=result.strip())] if result.strip() else []
    if isinstance(result, dict):
        result = result.get("results") or []
    hits = []
    for item in result if isinstance(result, list) else []:
        if isinstance(item, dict):
            url = str(item.get("url") or item.get("link") or "")
            snippet = str(item.get("content") or item.get("snippet") or item.get("body") or "")
            hits.append(Hit(docid=url, title=str(item.get("title") or url), snippet=" ".join(snippet.split())))
    return hits


class _Text(HTMLParser):
    """Visible text and title of an HTML page (scripts and styles dropped)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self._skip += tag in ("script", "style", "noscript")
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style", "noscript") and self._skip > 0
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data.strip()
        elif not self._skip and data.strip():
            self.parts.append(" ".join(data.split()))


class HostedSearch:
    """``search`` through a LangChain tool, ``open_page`` by GET; answers kept per process (see above)."""

    kind = "hosted"

    def __init__(self, tool: Any) -> None:
        self.tool = tool
        self._lock = threading.Lock()
        self._searches: dict[tuple[str, int], list[Hit]] = {}
        self._pages: dict[str, Page | None] = {}

    def search(self, query: str, k: int) -> list[Hit]:
        with self._lock:
            if (query, k) not in self._searches:
                self._searches[(query, k)] = hits_of(self.tool.invoke({"query": query}))[:k]
            return list(self._searches[(query, k)])

    def open_page(self, docid: str) -> Page | None:
        if not docid.startswith(("http://", "https://")):
            return None
        with self._lock:
            if docid not in self._pages:
                import httpx

                reply = httpx.get(docid, timeout=PAGE_TIMEOUT_S, follow_redirects=True)
                parser = _Text()
                parser.feed(reply.text)
                self._pages[docid] = Page(docid=docid, url=docid, title=parser.title or docid,
                                          text="\n".join(parser.parts)) if reply.is_success else None
            return self._pages[docid]
