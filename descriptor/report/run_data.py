"""The run viewer's data files: one per task directory, and the runs index.

A report has one run page, ``run.html``; which run it shows is in its
fragment, ``run.html#<benchmark>/<system>/<task>/run_<r>[.rollback_<k>]``
(each part percent-encoded, see :func:`run_key`). Its script finds the run in
the runs index and loads the run's data by adding a ``<script>`` element:
from a ``file://`` page that is the one way to read another local file (the
CSP's ``script-src 'self' file:`` allows it; ``fetch`` and XHR of local files
do not work), so both are JavaScript files calling a global function:

- ``data/runs.js``: ``masRuns({...})`` (:func:`index_js`): per benchmark and task,
  its grid page and, per system, ``[run index, outcome class]`` of every run:
  the viewer's sibling links and the check that a run exists;
- ``data/<benchmark>/<system>/<task>.js``: ``masRunData([benchmark, system, task], "<base64>")``
  (:func:`task_js`): the views (:mod:`descriptor.report.run_page`) of the
  directory's runs and rollbacks, as zlib-deflated JSON in base64, inflated by
  the browser's ``DecompressionStream("deflate")``. A debate transcript of
  ~5 KB of JSON takes ~1.3 KB this way; one file per task directory rather
  than per run keeps the file count down and compresses a task's runs
  together.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

LEVEL = 9
"""zlib level: the files are small, so the best compression costs ~30 µs per run."""

_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True)


def _js_text(value: Any) -> str:
    """``value`` as a JavaScript literal (JSON, which is JavaScript; ``<`` escaped so no text can read as markup)."""
    return _JSON.encode(value).replace("<", "\\u003c")


class JsonText(str):
    """JSON text a data file embeds as it is (a run's transcript rows from its page data file, already checked to
    parse): encoding what was just decoded cost more than the rest of the run's view."""


def _view_text(view: Mapping[str, Any]) -> str:
    """``view`` as JSON, its :class:`JsonText` values spliced in as they are."""
    raw = {k: v for k, v in view.items() if isinstance(v, JsonText)}
    text = _JSON.encode({k: v for k, v in view.items() if k not in raw})
    if not raw:
        return text
    spliced = ",".join(f"{_JSON.encode(k)}:{v}" for k, v in sorted(raw.items()))
    return text[:-1] + ("," if len(text) > 2 else "") + spliced + "}"


def task_js(names: tuple[str, str, str], task_dir_href: str, views: Mapping[str, dict[str, Any]]) -> str:
    """The data file of one task directory.

    ``names``: (benchmark, system, task), raw; ``task_dir_href``: the task directory relative to the report
    directory (the viewer's run file links); ``views``: :func:`~descriptor.report.render.run_name` -> view.
    """
    runs = ",".join(f"{_JSON.encode(name)}:{_view_text(view)}" for name, view in sorted(views.items()))
    raw = f'{{"dir":{_JSON.encode(task_dir_href)},"runs":{{{runs}}}}}'.encode()
    packed = base64.b64encode(zlib.compress(raw, LEVEL)).decode("ascii")
    return f"masRunData({_js_text(list(names))},\"{packed}\");\n"


_CALL = re.compile(r'masRunData\((.*),"([A-Za-z0-9+/=]*)"\);\n', re.S)  # base64 holds no quote: the last "," splits


def read_task_js(text: str) -> tuple[list[str], dict[str, Any]]:
    """([benchmark, system, task], ``{"dir", "runs"}``) of a :func:`task_js` file, decoded as the viewer does
    (for tests and tools)."""
    m = _CALL.fullmatch(text)
    if m is None:
        raise ValueError('not a run data file (expected masRunData([...],"<base64>");)')
    return json.loads(m.group(1)), json.loads(zlib.decompress(base64.b64decode(m.group(2))))


def index_js(runs: Iterable[tuple[str, str, str, int, str]], grid_page: Mapping[tuple[str, str], int]) -> str:
    """``data/runs.js``: ``masRuns({benchmark: {task: {"page": n, "runs": {system: [[r, cls], ...]}}}})``.

    ``runs``: (benchmark, system, task, run index, outcome class ``ok``/``fail``/``skip``) in any order;
    ``grid_page``: (benchmark, task) -> the task's grid page (1: the index). Names are kept raw here;
    the viewer percent-encodes them into links as :func:`~descriptor.report.render.run_key` does.
    """
    tree: dict[str, dict[str, Any]] = {}
    for bench, system, task, r, cls in sorted(runs):
        entry = tree.setdefault(bench, {}).setdefault(task, {"page": grid_page.get((bench, task), 1), "runs": {}})
        entry["runs"].setdefault(system, []).append([r, cls])
    return f"masRuns({_js_text(tree)});\n"
