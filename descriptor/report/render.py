"""Templates, filters, file layout and page writers of the report.

Layout of the report directory (default ``<root>/report/``)::

    index.html                                   the answer, overview, plots, first grid page, failures
    grid/<benchmark>-<page>.html                 further grid pages (:data:`GRID_PAGE` tasks each)
    run.html                                     the one run viewer: run.html#<benchmark>/<system>/<task>/run_<r>
    data/runs.js                                 the runs index the viewer navigates by
    data/<benchmark>/<system>/<task>.js          the views of a task directory's runs and rollbacks
    graphs/...                                   the topology pictures, only when the report is not inside the
                                                 experiment directory (else they are linked where they are)
    assets/report.css, report.js, run.js         shared by every page (local files, no network)

Each run's data is a small compressed file read by the shared viewer page
(:mod:`descriptor.report.run_data`), not a page of its own: 10,000 run pages
repeated the same head, links and script for every run.

The report is built in a staging directory beside its destination and takes
its place only when complete (:func:`staged`): a reader never sees a half
old, half new report, and 10,000 pages cost plain writes instead of a temp
file and a rename each (the renames alone were 8 s at 10,000 runs).

Pages are static HTML (jinja2, autoescaped: model output is untrusted); on
the index and grid pages the script only adds filters. The run viewer draws a
run from its data with ``textContent`` only, and links to the raw run files by
relative paths, so the report works from disk (file://) wherever the
experiment directory is, as long as the report stays beside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from descriptor.errors import UserError
from descriptor.outputs import OutputKind

if TYPE_CHECKING:  # imported by environment() only: the pass over the runs (forked workers) renders no template
    import jinja2


TEMPLATES = Path(__file__).parent / "templates"
ASSETS = ("report.css", "report.js", "run.js")
GRID_PAGE = 100
"""Tasks per grid page: the index stays light (10,000 runs are ~830 tasks of 4 systems x 3 runs)."""


def href(path: Path, start: Path) -> str:
    """URL of ``path`` relative to the directory ``start`` (percent-encoded, '/' separated)."""
    return quote(os.path.relpath(path, start).replace(os.sep, "/"))


def _pct(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{100 * v:.{digits}f} %"


def _pts(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:+.1f} pts"


def _pts_bare(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:+.1f}"


def _sig(v: float | None) -> str:
    return "–" if v is None else f"{v:+.3f}"


def _pval(p: float | None) -> str:
    return "–" if p is None else f"{p:.3f}" if p >= 0.001 else "< 0.001"


def _times(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _cost(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    return f"{v:+,.0f}" if unit == "tokens" else f"{v:+.6f}"


def _usd(v: float | None) -> str:
    return "–" if v is None else f"{v:.6f}"


def _int_sep(v: float | None) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{v:,.0f}"


def _share(v: float | None, n: int) -> str:
    return "–" if v is None else str(round(v * n))


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """jinja2's per-user cache of compiled templates (in its private temp directory), never an error."""
    import jinja2

    class BytecodeCache(jinja2.FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: Any) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    try:
        return BytecodeCache()
    except (OSError, RuntimeError):  # no safe directory: templates are compiled every time
        return None


@functools.cache
def environment() -> jinja2.Environment:
    """The jinja2 environment: templates from ``templates/``, HTML autoescaped, undefined names an error.

    One per process, its compiled templates kept by jinja2's bytecode cache (keyed by the template's source):
    compiling the five templates was ~0.1 s of every report's start-up."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             bytecode_cache=_bytecode_cache())
    env.filters.update(pct=_pct, pts=_pts, pts_bare=_pts_bare, sig=_sig, pval=_pval, times=_times, cost=_cost, usd=_usd,
                       int_sep=_int_sep, share=_share)
    return env


@functools.lru_cache(maxsize=65536)
def q(name: str) -> str:
    """A percent-encoded path component (cached: the same names recur in every link)."""
    return quote(name, safe="")


def run_name(r: int, rollback: int | None = None) -> str:
    """``run_<r>`` or ``run_<r>.rollback_<k>``: a run's name inside its task's data file."""
    return f"run_{r}" if rollback is None else f"run_{r}.rollback_{rollback}"


def task_key(bench: str, system: str, task_id: str) -> str:
    """``<benchmark>/<system>/<task>``, each part percent-encoded: names the data file and starts a run key."""
    return f"{q(bench)}/{q(system)}/{q(task_id)}"


def run_key(bench: str, system: str, task_id: str, r: int, rollback: int | None = None) -> str:
    """The viewer's fragment of a run (``run.html#<run_key>``)."""
    return f"{task_key(bench, system, task_id)}/{run_name(r, rollback)}"



@dataclass(kw_only=True, slots=True)
class Layout:
    """Where each page of the report lives, and the links between them.

    Links are built as strings relative to the report directory (``*_rel``);
    a page at depth d prefixes them with d ``../``.
    This is string work on purpose: ``os.path.relpath`` per link cost seconds
    at 10,000 runs.
    """

    out: Path
    root: Path
    grid_pages: dict[str, list[list[str]]] = field(default_factory=dict)
    """benchmark -> pages of task ids (sorted)."""
    _page_of: dict[tuple[str, str], int] = field(default_factory=dict)
    _dir_rel: dict[Path, str] = field(default_factory=dict)

    def plan_grid(self, tasks_by_benchmark: Mapping[str, Sequence[str]]) -> None:
        for bench, tasks in sorted(tasks_by_benchmark.items()):
            ids = sorted(set(tasks))
            pages = [ids[i:i + GRID_PAGE] for i in range(0, len(ids), GRID_PAGE)] or [[]]
            self.grid_pages[bench] = pages
            for n, page in enumerate(pages, 1):
                for t in page:
                    self._page_of[(bench, t)] = n

    def grid_file(self, bench: str, page: int) -> Path:
        return self.out / "index.html" if page == 1 else self.out / "grid" / f"{bench}-{page}.html"

    def grid_rel(self, bench: str, page: int) -> str:
        return "index.html" if page == 1 else f"grid/{q(bench)}-{page}.html"

    @staticmethod
    def anchor(bench: str, task_id: str) -> str:
        return f"task-{bench}-{task_id}"

    def task_rel(self, bench: str, task_id: str) -> str:
        """The task's row in its grid page."""
        return f"{self.grid_rel(bench, self._page_of.get((bench, task_id), 1))}#{q(self.anchor(bench, task_id))}"

    @staticmethod
    def run_rel(bench: str, system: str, task_id: str, r: int, rollback: int | None = None) -> str:
        """The run viewer showing run ``r`` (or its rollback)."""
        return f"run.html#{run_key(bench, system, task_id, r, rollback)}"

    def data_file(self, bench: str, system: str, task_id: str) -> Path:
        """The data file of a task directory's runs (one directory per system: directory creation was a third
        of the file-system time of 10,000 run pages, one directory per task)."""
        return self.out / "data" / bench / system / f"{task_id}.js"

    def index_file(self) -> Path:
        """The runs index the viewer navigates by."""
        return self.out / "data" / "runs.js"

    def dir_rel(self, d: Path) -> str:
        """A directory outside the report (a task directory), relative to the report directory."""
        if d not in self._dir_rel:
            self._dir_rel[d] = href(d, self.out)
        return self._dir_rel[d]

    def file_rel(self, path: Path) -> str:
        """A file outside the report (a run file, a compared root's report), relative to the report directory."""
        return f"{self.dir_rel(path.parent)}/{q(path.name)}"


_made: set[Path] = set()


def write_file(path: Path, data: bytes | str) -> None:
    """Write one file of a report being built in its staging directory (see :func:`staged`): a plain write,
    since the directory as a whole replaces the old report only once it is complete."""
    if path.parent not in _made:
        path.parent.mkdir(parents=True, exist_ok=True)
        _made.add(path.parent)
    with open(path, "wb") as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def write_assets(out: Path) -> None:
    for name in ASSETS:
        write_file(out / "assets" / name, (TEMPLATES / name).read_bytes())


def write_page(env: jinja2.Environment, template: str, path: Path, up: str, **context: Any) -> None:
    """Render ``template`` into ``path`` (atomic); ``up`` leads from the page's directory to the report directory."""
    html = env.get_template(template).render(up=up, assets=f"{up}assets", index_href=f"{up}index.html",
                                             body_class=context.pop("body_class", ""),
                                             generated_from=context.pop("generated_from", ""), **context)
    write_file(path, html)


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def script_json(obj: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: ``<``, ``>`` and ``&`` escaped, so no text in it
    (model output included) can close the element or start markup."""
    text = _COMPACT.encode(obj)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def json_text(obj: Any, limit: int = 4000) -> str:
    """Pretty JSON for a page (cut at ``limit`` characters)."""
    s = json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=True, default=str)
    return s if len(s) <= limit else s[:limit] + f"\n… ({len(s) - limit} more characters)"


MARKER = ".mas-report"
"""File in every report directory: only a directory holding it (or an empty one) is ever replaced."""
REPORT_OUT = OutputKind("report directory", files=(MARKER,), in_experiment=True)


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    """Yield a fresh staging directory beside ``out``; on success it replaces ``out`` as a whole.

    ``out`` must be absent, empty, or an earlier report (holding :data:`MARKER`):
    anything else is refused with a :class:`UserError`, so ``--out`` can never
    wipe a directory of other files. On failure the staging directory is removed
    and ``out`` is left as it was.
    """
    if out.exists() and not (out.is_dir() and ((out / MARKER).is_file() or not any(out.iterdir()))):
        raise UserError(f"--out {out}: exists and is not a report directory (no {MARKER} file); "
                        "give a new or empty directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    _made.clear()
    remove_stale_stages(out)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    held = _hold(stage)  # while this process lives: another report sees the stage is in use
    try:
        yield stage
        (stage / MARKER).write_text("written by `python main.py report`; this whole directory is replaced on rewrite\n")
        os.chmod(stage, 0o755)  # mkdtemp makes 0700; a report is meant to be shared
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / "report")
        os.replace(stage, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        os.close(held)


def _hold(directory: Path) -> int:
    """An exclusive ``flock`` on ``directory``, held until the returned descriptor is closed (or the process
    dies, killed or not: the kernel lets go then)."""
    fd = os.open(directory, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def remove_stale_stages(out: Path) -> list[Path]:
    """Remove the staging directories (``.<name>.*.tmp``, ``.<name>.*.old``) that reports killed while writing
    ``out`` left beside it; a stage a live report holds (:func:`_hold`) is left alone. The removed ones."""
    removed = []
    for stale in (*out.parent.glob(f".{out.name}.*.tmp"), *out.parent.glob(f".{out.name}.*.old")):
        try:
            fd = os.open(stale, os.O_RDONLY)
        except OSError:  # gone meanwhile, or no directory
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale)
        except OSError:  # a live report's
            continue
        finally:
            os.close(fd)
    return removed
