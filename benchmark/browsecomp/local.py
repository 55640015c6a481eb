"""The local search backend: a directory of documents indexed with SQLite FTS5, ranked by BM25.

A corpus (BrowseComp-Plus style) is a directory holding ``.txt``/``.md`` files (one document each: id =
path relative to the directory without the suffix, title = first non-empty line) and/or ``.jsonl`` files
(one document a line: ``docid`` or ``id``, ``text`` or ``contents``, optional ``title`` and ``url``).
Hidden files are skipped.

The index is built once per process and corpus, in memory; with ``index_cache`` set it is kept in
``<index_cache>/<content hash>.sqlite`` and reused while the corpus's bytes are unchanged (the hash reads
every file: ~1 s per GB). Queries are free text: their words are OR-ed (FTS5 syntax in a query is never
interpreted), stemmed (Porter) and ranked by FTS5's ``bm25()``.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "harbour.txt").write_text("Old harbour\\nThe lighthouse is red.")
>>> index = LocalIndex.build(d)
>>> [h.docid for h in index.search("red lighthouses", 3)]
['harbour']
>>> index.open_page("harbour").title
'Old harbour'
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from benchmark.browsecomp.search import Hit, Page
from descriptor.errors import UserError

TEXT_SUFFIXES = (".txt", ".md")
_WORD_RE = re.compile(r"\w+")
SCHEMA = """
CREATE TABLE docs(docid TEXT PRIMARY KEY, title TEXT, url TEXT, body TEXT);
CREATE VIRTUAL TABLE pages USING fts5(title, body, content='docs', content_rowid='rowid',
                                      tokenize='porter unicode61 remove_diacritics 2');
"""


def corpus_files(root: Path) -> list[Path]:
    """The corpus's document files, in a fixed order."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (*TEXT_SUFFIXES, ".jsonl")
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def content_hash(root: Path) -> str:
    """SHA-256 over every document file's relative path and bytes: the index cache's key."""
    h = hashlib.sha256()
    for p in corpus_files(root):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        with p.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def read_documents(root: Path) -> Iterator[tuple[str, str, str, str]]:
    """(docid, title, url, text) of every document; ``UserError`` naming the file and line of a bad one."""
    for p in corpus_files(root):
        rel = p.relative_to(root).as_posix()
        if p.suffix in TEXT_SUFFIXES:
            text = p.read_text(encoding="utf-8", errors="replace")
            title = next((ln.strip().lstrip("#").strip() for ln in text.splitlines() if ln.strip()), rel)
            yield rel[: -len(p.suffix)], title, "", text
            continue
        with p.open(encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    docid, text = str(row.get("docid", row.get("id"))), row.get("text", row.get("contents"))
                except (ValueError, AttributeError):
                    raise UserError(f"{p}:{lineno}: expected a JSON object per line") from None
                if docid == "None" or not isinstance(text, str):
                    raise UserError(f"{p}:{lineno}: a document needs 'docid' (or 'id') and 'text' (or 'contents')")
                title = str(row.get("title") or text.strip().split("\n", 1)[0][:120])
                yield docid, title, str(row.get("url") or ""), text


def fts_query(text: str) -> str | None:
    """``text``'s words as an FTS5 query: each quoted (so no word is an operator), OR-ed; None without words."""
    words = _WORD_RE.findall(text)
    return " OR ".join(f'"{w}"' for w in words) or None


def _fill(conn: sqlite3.Connection, root: Path) -> None:
    conn.executescript(SCHEMA)
    seen: set[str] = set()
    for docid, title, url, text in read_documents(root):
        if docid in seen:
            raise UserError(f"corpus {root}: document id {docid!r} appears twice")
        seen.add(docid)
        conn.execute("INSERT INTO docs(docid, title, url, body) VALUES (?, ?, ?, ?)", (docid, title, url, text))
    if not seen:
        raise UserError(f"corpus {root}: no documents (expected .txt/.md files or .jsonl lines)")
    conn.execute("INSERT INTO pages(pages) VALUES ('rebuild')")
    conn.commit()


class LocalIndex:
    """A corpus's full-text index (see the module docstring); safe to share between threads."""

    kind = "local"

    def __init__(self, conn: sqlite3.Connection, root: Path) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.root = root

    @classmethod
    def build(cls, root: Path, cache_dir: Path | None = None) -> LocalIndex:
        """The index of corpus ``root``: in memory, or from/into ``cache_dir`` keyed by the content hash."""
        if not root.is_dir():
            raise UserError(f"benchmarks.browsecomp.corpus_path: {root}: not a directory of documents")
        if cache_dir is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            _fill(conn, root)
            return cls(conn, root)
        cache_dir.mkdir(parents=True, exist_ok=True)
        path = cache_dir / f"{content_hash(root)}.sqlite"
        if not path.exists():  # built aside and renamed: a crash never leaves half an index under the name
            fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".building")
            os.close(fd)
            try:
                with sqlite3.connect(tmp) as building:
                    _fill(building, root)
                building.close()
                os.replace(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)
        return cls(sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False), root)

    def search(self, query: str, k: int) -> list[Hit]:
        match = fts_query(query)
        if match is None:
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT d.docid, d.title, snippet(pages, 1, '', '', ' ... ', 24) FROM pages "
                "JOIN docs d ON d.rowid = pages.rowid WHERE pages MATCH ? ORDER BY bm25(pages) LIMIT ?",
                (match, k)).fetchall()
        return [Hit(docid=d, title=t, snippet=" ".join(s.split())) for d, t, s in rows]

    def open_page(self, docid: str) -> Page | None:
        with self._lock:
            row = self._conn.execute("SELECT docid, title, url, body FROM docs WHERE docid = ?", (docid,)).fetchone()
        return None if row is None else Page(docid=row[0], title=row[1], url=row[2], text=row[3])

    def find_phrase(self, phrase: str) -> tuple[str, str] | None:
        """(docid, the phrase as that document writes it) of the best-ranked document holding ``phrase``'s
        words in order (case, accents and punctuation between words aside); None when none does."""
        words = _WORD_RE.findall(phrase)
        if not words:
            return None
        pattern = re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)
        with self._lock:
            rows = self._conn.execute(
                "SELECT d.docid, d.body FROM pages JOIN docs d ON d.rowid = pages.rowid WHERE pages MATCH ? "
                "ORDER BY bm25(pages) LIMIT 50", ('"' + " ".join(words) + '"',)).fetchall()
        for docid, body in rows:
            if (m := pattern.search(body)) is not None:
                return docid, m.group(0)
        return None


@lru_cache(maxsize=4)
def local_index(corpus: str, cache_dir: str | None) -> LocalIndex:
    """One index per process and corpus (``corpus`` and ``cache_dir`` as given in the options)."""
    return LocalIndex.build(Path(corpus).expanduser(), Path(cache_dir).expanduser() if cache_dir else None)
