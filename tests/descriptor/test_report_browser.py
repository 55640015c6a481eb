"""The report in a real headless Chromium: the DOM after scripts ran, no console error, nothing fetched.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped when no Chromium is on PATH.
Also refreshes ``docs/report.png``, the README's screenshot.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.scripts_loader import load_script
from tests.descriptor.test_report import experiment, run_url, run_view  # noqa: F401  (experiment: the scripted experiment fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
cdp = load_script("chromium_cdp")
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "report.png"

VISIBLE_ROWS = "[...document.querySelectorAll('table.grid tbody tr')].filter(tr => tr.offsetParent !== null).length"
LABEL_BOXES = """[...document.querySelectorAll('svg.chart')].map(s =>
    [...s.querySelectorAll('text.label')].map(t => { const r = t.getBBox(); return [r.x, r.y, r.width, r.height]; }))"""


@pytest.fixture()
def browser(tmp_path):
    if cdp.find_chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    with cdp.Chromium(tmp_path / "profile", width=1280, height=1000) as b:
        yield b


def until(browser, expression: str):
    """The first truthy value of ``expression`` in the page, polled for up to 10 s (else its last value): the
    viewer draws a run asynchronously, after the page's load event (its data file is loaded and inflated)."""
    return browser.evaluate(f"""new Promise(done => {{ const t0 = Date.now(); (function poll() {{
        const v = ({expression}); if (v || Date.now() - t0 > 10000) {{ done(v); }} else {{ setTimeout(poll, 20); }}
    }})(); }})""")


READY = "document.body.dataset.ready"
"""The viewer's state: "1" a run drawn, "error" none can be (the page says why)."""


def open_run(browser, url: str) -> None:
    """Open the viewer at ``url`` (a fresh load, also from another run of the same page) and wait for the run."""
    browser.open("about:blank")
    browser.open(url)
    assert until(browser, READY) == "1", browser.evaluate("document.getElementById('status').textContent")


def _overlaps(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_index_renders_and_scripts_run_without_errors(experiment, browser):  # noqa: F811
    browser.open((experiment / "report" / "index.html").as_uri())
    assert browser.evaluate("document.body.dataset.ready") == "1"  # report.js ran to its end
    n_runs = len(list(experiment.glob("arith/*/*/run_*.result.json")))
    assert browser.evaluate("document.querySelectorAll('table.grid a.run').length") == n_runs
    assert browser.evaluate("document.querySelectorAll('svg.chart').length") == 5
    findings = browser.evaluate("[...document.querySelectorAll('p.finding')].map(p => p.innerText)")
    assert len(findings) == 3 and all(f.startswith("On 4 arith tasks") for f in findings)
    # labels do not overlap with the real font metrics either
    for boxes in browser.evaluate(LABEL_BOXES):
        assert not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), boxes
    # the grid filter works: only tasks with a failed run stay visible
    failed_tasks = {p.parent.name for p in experiment.glob("arith/*/*/run_*.result.json")
                    if not json.loads(p.read_text())["success"]}
    browser.evaluate("document.querySelector('[data-filter=failed]').click()")
    assert browser.evaluate(VISIBLE_ROWS) == len(failed_tasks)
    assert browser.evaluate("document.querySelector('[data-count]').textContent").startswith(f"{len(failed_tasks)} of 4")
    browser.evaluate("document.querySelector('[data-filter=all]').click()")
    assert browser.evaluate(VISIBLE_ROWS) == 4
    browser.screenshot(SCREENSHOT, height=1500)
    assert SCREENSHOT.stat().st_size > 50_000
    assert browser.problems() == []


def test_run_view_renders_its_data_with_attribution_and_toggles(experiment, browser):  # noqa: F811
    report = experiment / "report"
    rec = json.loads((experiment / "attribution" / "scores.jsonl").read_text().splitlines()[0])
    view = run_view(report, rec["id"])
    open_run(browser, run_url(report, rec["id"]))
    assert browser.evaluate("document.querySelector('.verdict').textContent") == "not solved"
    # the transcript drawn from the run's data file: one item per row, each event's actor and type
    drawn = browser.evaluate(
        "[...document.querySelectorAll('#events > li')].map(li => li.className.startsWith('round') ? li.textContent"
        " : [li.querySelector('.actor').textContent, li.querySelector('.type').textContent])")
    expected = [r["header"] if "header" in r else [r["actor"], r["type"]] for r in view["rows"]]
    assert drawn == expected and len(drawn) > 5
    assert browser.evaluate("document.querySelector('#summary pre').textContent") == view["answer"]
    marks = browser.evaluate("[...document.querySelectorAll('.mark')].map(m => m.textContent)")
    assert any(m.startswith("top-1 of learned") for m in marks) and any("conformal" in m for m in marks)
    # the view's marks (step position -> marks) are placed by the viewer on those steps' transcript items
    placed = browser.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#events li.ev.marked')].map(li => [li.id.slice(5),"
        " [...li.querySelectorAll('.head .mark:not(.redo)')].map(m => m.textContent)]))")
    assert placed and placed == {pos: [text for _, text in m] for pos, m in view["marks"].items()}
    tools = "[...document.querySelectorAll('li.ev.t-tool_call')].filter(e => e.offsetParent !== null).length"
    assert browser.evaluate(tools) > 0
    assert browser.evaluate("document.querySelector('li.ev.t-tool_call .toolcall .result pre') !== null")
    browser.evaluate("document.querySelector('[data-toggle=hide-tools]').click()")
    assert browser.evaluate(tools) == 0
    # a step link of the attribution table marks that step
    browser.evaluate("document.querySelector('.attribution table a').click()")
    target = "document.querySelector('li.ev.target') && document.querySelector('li.ev.target').id"
    assert until(browser, target) == "step-0"
    # the task's other runs: a sibling link opens that run in the same viewer
    n_siblings = browser.evaluate("document.querySelectorAll('#siblings a.run').length")
    assert n_siblings == 4 * 3
    other = browser.evaluate(
        "[...document.querySelectorAll('#siblings a.run')].find(a => !a.classList.contains('current')).href")
    open_run(browser, other)
    assert browser.evaluate("document.querySelector('#siblings a.run.current').href") == other
    # the run files are linked where they are, beside the report
    files = browser.evaluate("[...document.querySelectorAll('#summary .files a')].map(a => a.href)")
    assert files and all(Path(unquote(urlparse(f).path)).is_file() for f in files)
    assert browser.problems() == []


def test_rollback_link_opens_its_transcript(experiment, browser):  # noqa: F811
    report = experiment / "report"
    (rb_json,) = [p for p in experiment.rglob("run_*.rollback_0.json")]
    original = rb_json.relative_to(experiment).as_posix().removesuffix(".rollback_0.json")
    open_run(browser, run_url(report, original))
    browser.evaluate("document.querySelector('.rollbacks a').click()")
    heading = ("document.body.dataset.ready === '1' && !document.getElementById('rollback-of').hidden"
               " && document.querySelector('.rollback-of h2').textContent")
    assert "Rollback 0 of" in until(browser, heading)
    assert browser.evaluate("document.querySelectorAll('#events li.ev').length") > 0
    assert browser.problems() == []


def test_a_missing_run_or_data_file_is_said_not_hidden(experiment, browser, tmp_path):  # noqa: F811
    report = experiment / "report"
    browser.open(run_url(report, "arith/sas/no_such_task/run_0"))
    assert until(browser, READY) == "error"
    assert "has no run" in browser.evaluate("document.getElementById('status').textContent")
    # a data file gone: the viewer says so (the browser reports the failed script load, nothing else)
    import shutil

    copy = experiment / "report-nodata"
    try:
        shutil.copytree(report, copy)
        (copy / "data" / "arith" / "sas" / "arith_0_0000.js").unlink()
        browser.open(run_url(copy, "arith/sas/arith_0_0000/run_0"))
        assert until(browser, READY) == "error"
        assert "data file" in browser.evaluate("document.getElementById('status').textContent")
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    browser.events.clear()


def test_hostile_model_output_stays_text(tmp_path, browser):
    from descriptor.report import write_report
    from tests.descriptor_fixtures import ev, write_run

    hostile = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    events = [ev("solver", "act", tin=3, tout=2, content=hostile, step_index=0, role="solver",
                 input_messages=[{"role": "user", "content": hostile}]),
              ev("solver", "finalize", content="</script><b>42</b>", step_index=1)]
    task = "t #1%é?"  # a task name to percent-encode: in the fragment, the data file's URL and the grid link
    write_run(tmp_path / "arith" / "sas" / task, 0, events, success=True)
    write_report(tmp_path)
    open_run(browser, run_url(tmp_path / "report", f"arith/sas/{task}/run_0"))
    assert browser.evaluate("document.getElementById('run-title').textContent") == f"sas · {task} · run 0"
    assert browser.evaluate("window.__pwned === undefined")
    shown = browser.evaluate("[...document.querySelectorAll('li.ev pre.content')].map(p => p.textContent)")
    assert shown == [hostile, "</script><b>42</b>"]
    assert browser.evaluate("document.querySelectorAll('li.ev img, li.ev script, li.ev b').length") == 0
    grid = browser.evaluate("document.querySelector('#crumbs a').href")
    browser.open(grid)
    assert browser.evaluate("document.querySelector('tr.target th').textContent") == task
    assert browser.problems() == []
