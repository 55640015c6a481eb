"""What the agents' two tools need from a search backend, and how results read as tool output.

Backends: :class:`~benchmark.browsecomp.local.LocalIndex` (a directory of documents, BM25 over SQLite
FTS5) and :class:`~benchmark.browsecomp.hosted.HostedSearch` (a LangChain web-search tool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(kw_only=True, frozen=True, slots=True)
class Hit:
    """One search result."""

    docid: str
    """What ``open_page`` takes: a corpus document id, or a URL on the hosted backend."""
    title: str
    snippet: str


@dataclass(kw_only=True, frozen=True, slots=True)
class Page:
    """One opened document."""

    docid: str
    title: str
    text: str
    url: str = ""


class SearchBackend(Protocol):
    """Search and open pages; both deterministic for a given backend state (a run's environment is rebuilt
    by replaying its calls, see :mod:`mas.topologies.environment`)."""

    kind: str
    """``local`` or ``hosted``."""

    def search(self, query: str, k: int) -> list[Hit]:
        """The best ``k`` hits for ``query``, best first (may be fewer)."""
        ...

    def open_page(self, docid: str) -> Page | None:
        """The page ``docid`` names, or None when there is none."""
        ...


def format_hits(query: str, hits: list[Hit]) -> str:
    """Search results as the agent reads them: one block per hit, the id to open first."""
    if not hits:
        return f"No results for {query!r}."
    return "\n".join(f"[{i}] docid: {h.docid}\n    title: {h.title}\n    {h.snippet}" for i, h in enumerate(hits, 1))


def format_page(page: Page, max_chars: int) -> str:
    """An opened page as the agent reads it: title, URL when known, and the text cut at ``max_chars``."""
    head = f"docid: {page.docid}\ntitle: {page.title}\n" + (f"url: {page.url}\n" if page.url else "")
    text = page.text if len(page.text) <= max_chars else (
        page.text[:max_chars] + f"\n[... page cut at {max_chars} of {len(page.text)} characters]")
    return f"{head}\n{text}"
